"""Lockstep fuzz: a kernel-walk matcher and a Python-walk matcher never diverge.

Each seed drives both matchers through the same random session: random allowed tokens
(EOS included), rollbacks of 1–3 tokens, and jump-forward spans (``forced_tokens``).
Most picks come from the tokens of a few real statements (when allowed) so sessions look
like SQL and configurations recur; the rest are uniform over the whole mask, which is
where odd tokens (unicode pieces, quotes, comment openers) come from. At
every step the two masks, allowed counts, entry ids, forced spans, acceptance and
configuration hashes must be identical. Caches persist across seeds (as in serving), so
later seeds mix hits and misses on both sides.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from grid_sql.grammar import Grammar, RoleProjection, SchemaLexicon
from grid_sql.mask.cache import MaskCache
from grid_sql.mask.guide import Guide, Matcher, bitmask_to_ids

from ..grammar.toy_grammars import CRUD
from ..mask.helpers import greedy_tokens, vocab
from ..mask.test_guide import SENTENCES
from .helpers import CHINOOK_SQL, guide_pair

LEX = SchemaLexicon(
    {
        "TABLE_NAME": [b"employees", b"orders", b"t", b'"Odd (name)"'],
        "COLUMN_NAME": [b"a", b"b", b"name", b"count"],
    },
    fold_bare_case=True,
)
CRUD_LEX = (
    Grammar.from_lark(CRUD, name="crud").project(RoleProjection.select_only()).with_lexicon(LEX)
)


def _pair(gname: str, vname: str) -> tuple[Guide, Guide]:
    if gname != "crud+lexicon":
        return guide_pair(gname, vname)
    gk = Guide(CRUD_LEX, vocab(vname), cache=MaskCache())
    gp = Guide(CRUD_LEX, vocab(vname), cache=MaskCache(), trie=gk.trie)
    gk.walker.use_kernel, gp.walker.use_kernel = True, False
    return gk, gp


def _same(mk: Matcher, mp: Matcher, bk: np.ndarray, bp: np.ndarray) -> np.ndarray:
    nk, ek = mk.guide.fill_bitmask(mk.config, bk)
    np_, ep = mp.guide.fill_bitmask(mp.config, bp)
    np.testing.assert_array_equal(bk, bp)
    assert (nk, ek) == (np_, ep)
    assert mk.config_hash == mp.config_hash and mk.tokens == mp.tokens
    assert mk.is_accepting() == mp.is_accepting()
    return bitmask_to_ids(bk)


POOLS = {
    "crud+lexicon": SENTENCES,
    "sqlite": (
        b"SELECT count(*) FROM singer WHERE age > 20 AND name LIKE 'a%' ORDER BY 1 DESC;",
        b"select T1.name, avg(T2.x) from a as T1 join b as T2 on T1.id = T2.id group by 1",
    ),
    "chinook": CHINOOK_SQL,
}


def pool(gname: str, vname: str) -> np.ndarray:
    return np.unique([t for s in POOLS[gname] for t in greedy_tokens(vname, s)])


def run_seed(gk: Guide, gp: Guide, seed: int, max_steps: int, pool: np.ndarray) -> int:
    rng = random.Random(seed)
    mk, mp = gk.matcher(), gp.matcher()
    bk, bp = mk.allocate_bitmask(), mp.allocate_bitmask()
    for _ in range(max_steps):
        if mk.is_terminated():
            break
        ids = _same(mk, mp, bk, bp)
        r = rng.random()
        if r < 0.1 and mk.tokens:
            n = rng.randint(1, min(3, len(mk.tokens)))
            mk.rollback(n)
            mp.rollback(n)
        elif r < 0.2:
            span = mk.forced_tokens(8)
            assert span == mp.forced_tokens(8)
            mk.accept_tokens(span)
            mp.accept_tokens(span)
        else:
            near = np.intersect1d(ids, pool, assume_unique=True)
            pick = near if near.size and rng.random() < 0.97 else ids
            t = int(pick[rng.randrange(pick.size)])
            mk.accept_token(t)
            mp.accept_token(t)
    return len(mk.tokens)


@pytest.mark.parametrize(
    ("gname", "vname", "seeds", "max_steps"),
    [
        pytest.param("crud+lexicon", "llama-spm", range(200), 5, marks=pytest.mark.slow),
        ("sqlite", "gpt-2", range(1000, 1012), 6),
        ("chinook", "llama-spm", range(2000, 2012), 6),
    ],
)
def test_lockstep_fuzz(gname: str, vname: str, seeds: range, max_steps: int) -> None:
    gk, gp = _pair(gname, vname)
    p = pool(gname, vname)
    total = sum(run_seed(gk, gp, s, max_steps, p) for s in seeds)
    assert total >= len(seeds) * 2
    assert gk.n_walks > len(seeds)  # the kernel walked, not only hit
