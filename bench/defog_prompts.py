"""The prompt each defog question gets, as a digest per question (issue #25 partial passes).

Why: a partial pass (``defog.py --whole --over B``) may carry an answer of ``B`` over only
where the change cannot reach it, and a change to schema linking or prompt text reaches
every question whose prompt it changes. The records do not keep prompts, so the prompts of
two checkouts are compared instead: run this in each (no model runs; the prompts are built
with ``Asker.messages``, as the pass builds them) and diff the outputs.

    PYTHONPATH=. python bench/defog_prompts.py --big > /tmp/new.tsv
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from defog import load_questions, reader_url  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--big", action="store_true", help="the big catalog (else own databases)")
    ap.add_argument("--model", default="qwen2.5-coder-1.5b")
    args = ap.parse_args()

    from defog_big import BIG

    from grid_sql.ask.asker import Asker, load_backend

    backend = load_backend(args.model)
    askers: dict[str, Asker] = {}
    for q in sorted(load_questions(), key=lambda q: q.qid):
        db = BIG if args.big else q.db
        if db not in askers:
            askers[db] = Asker(reader_url(db), model=backend, audit=False, date_help=True)
        text = json.dumps(askers[db].messages(q.text), sort_keys=True)
        print(f"{q.qid}\t{hashlib.sha256(text.encode()).hexdigest()[:16]}")


if __name__ == "__main__":
    main()
