#!/usr/bin/env python
"""A digest of the termination reserve's completions, to compare two checkouts (issue #26).

The reserve's completions decide forced endings, masks near the budget and the audit
trail, so a change that only makes the reserve faster must leave every completion as it
was. For each grammar (the Asker's scoped role grammar on the packaged Chinook, the same
role without scopes, the SQLite dialect grammar; Qwen2 vocabulary, a fresh
``ReserveTable``): the configuration after every token of the Chinook gold statements of
``bench/chinook_questions.json``, of their lower-cased and widened variants and of a few
CTE, set-operation and nested statements (left recursion, CTE references), and the
completion (its tokens and bytes, or the error) of each. One line per grammar: the count
and a BLAKE2b digest over the completions in order. Run it in both checkouts and compare:

    PYTHONPATH=. python bench/reserve_digest.py [--intern-limit N]

``--intern-limit`` clears the parser's intern table (and the memos keyed by its nodes) every
N nodes instead of every 2^18: the digests must not change.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time

# bench/ is the script's directory, so first on sys.path; grid_sql comes from PYTHONPATH=.
from masks import TOKENIZERS
from role_masks import QUESTIONS, chinook_role, grammar_for

EXTRA = [
    "WITH t AS (SELECT ArtistId, COUNT(*) AS n FROM Album GROUP BY ArtistId) "
    "SELECT a.Name, t.n FROM Artist a JOIN t ON t.ArtistId = a.ArtistId ORDER BY t.n DESC",
    "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 5) SELECT n FROM r",
    "SELECT Name FROM Track WHERE AlbumId IN (SELECT AlbumId FROM Album WHERE ArtistId IN "
    "(SELECT ArtistId FROM Artist WHERE Name LIKE 'A%')) UNION SELECT Name FROM Genre",
    "SELECT a, b FROM (SELECT BillingCountry AS a, SUM(Total) AS b FROM Invoice GROUP BY "
    "BillingCountry) AS x WHERE b > 10 ORDER BY b DESC LIMIT 3",
    "SELECT CASE WHEN Total > 10 THEN 'big' ELSE 'small' END, COUNT(*) FROM Invoice GROUP BY 1 "
    "HAVING COUNT(*) > 2",
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--intern-limit", type=int, default=0)
    args = ap.parse_args()
    import grid_sql as gs
    import grid_sql.parser.incremental as incremental

    if args.intern_limit:
        incremental.INTERN_LIMIT = args.intern_limit
    from grid_sql.errors import GridSQLError
    from grid_sql.mask.guide import Guide
    from grid_sql.mask.reserve import ReserveTable
    from grid_sql.mask.vocab import greedy_token_ids

    v = gs.Vocabulary.from_gguf(str(TOKENIZERS / "ggml-vocab-qwen2.gguf"))
    snap, pol = chinook_role()
    gold = [q["gold"] for q in json.loads(QUESTIONS.read_text())["questions"]]
    variants = [s.replace(" FROM ", " , 1 FROM ", 1) for s in gold] + [s.lower() for s in gold]
    stmts = gold + EXTRA + variants
    for kind in ("role+scopes", "role", "dialect"):
        g = grammar_for(kind, snap, pol)
        guide = Guide(g, v)
        res = ReserveTable(g, v)
        h = hashlib.blake2b(digest_size=16)
        n = 0
        t0 = time.perf_counter()
        for s in stmts:
            m = guide.matcher()
            for t in greedy_token_ids(v, s.encode(), max_len=32):
                try:
                    m.accept_token(t)
                except GridSQLError:
                    break  # a variant leaves this grammar's language here
                try:
                    c = res.completion(m.config)
                    got: object = (c.tokens, c.data)
                except GridSQLError as exc:
                    got = type(exc).__name__
                h.update(repr(got).encode())
                n += 1
        ms = (time.perf_counter() - t0) / n * 1e3
        print(f"{kind}: {n} completions, digest {h.hexdigest()} ({ms:.3f} ms each)")


if __name__ == "__main__":
    main()
