"""One mask cache shared by guides of different grammars over the same lexer and vocabulary
(the dialect, role projections, a narrower policy, scope-aware lexicons) must give every
guide exactly the masks it gets from a cache of its own: the namespace and key carry
everything a walk reads (OBL-KEY1 across grammars, not only within one)."""

from __future__ import annotations

import random

import numpy as np

from grid_sql.grammar import Grammar
from grid_sql.mask.cache import MaskCache
from grid_sql.mask.guide import Guide, bitmask_to_ids
from grid_sql.policy import AppPolicy, narrow, sqlite_baseline
from grid_sql.policy.grammar import role_grammar
from grid_sql.policy.scopes import role_scopes

from ..scope.helpers import snapshot
from .helpers import greedy_tokens, vocab

STARTS = [b"SELECT Name FROM Artist ", b"SELECT a.Title FROM Album AS a WHERE a.", b"SELECT "]


def _grammars() -> list[Grammar]:
    snap = snapshot("chinook")
    out = [Grammar.dialect("sqlite")]
    for policy in ({"verbs": ["select"]}, {"verbs": ["select"], "tables": {"allow": ["Artist"]}}):
        app = AppPolicy.from_mapping(policy, origin="test")
        out.append(role_grammar(out[0], snap, narrow(sqlite_baseline(snap), app, snap)))
    out.append(out[1].with_scopes(role_scopes(snap)))
    return out


def test_shared_cache_equals_own_cache_across_grammars() -> None:
    v = vocab("gpt-2")
    grammars = _grammars()
    shared = MaskCache()
    rng = random.Random(7)
    for start in STARTS:
        pairs = []
        for g in grammars:
            a = Guide(g, v, cache=shared)
            b = Guide(g, v, cache=MaskCache(), trie=a.trie)
            ma, mb = a.matcher(), b.matcher()
            if a.runtime.advance(ma.config, start) is not None:  # in this role's language
                prefix = greedy_tokens("gpt-2", start)
                ma.accept_tokens(prefix)
                mb.accept_tokens(prefix)
            pairs.append((a, b, ma, mb))
        for _step in range(12):  # the grammars take turns, so each reads the others' entries
            for a, b, ma, mb in pairs:
                if ma.is_terminated():
                    continue
                ba = np.zeros(a.n_words, np.int32)
                bb = np.zeros(b.n_words, np.int32)
                na, ea = a.fill_bitmask(ma.config, ba)
                nb, eb = b.fill_bitmask(mb.config, bb)
                where = f"{a.grammar.name} after {ma.text()!r}"
                np.testing.assert_array_equal(ba, bb, err_msg=where)
                assert (na, ea) == (nb, eb), where
                ids = bitmask_to_ids(ba)
                ids = ids[ids != a.eos_id]
                if not ids.size:
                    continue
                t = int(ids[rng.randrange(ids.size)])
                ma.accept_token(t)
                mb.accept_token(t)
