"""Shared pieces of the kernel parity tests: real grammars, real statements, two guides.

A *pair* is two guides over the same grammar, vocabulary and token trie with separate
caches: one walks with the Rust kernel, the other with the Python reference walk
(``Walker.walk_py``), so every mask, entry id and residue can be compared step by step.
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np

from grid_sql.grammar import Grammar
from grid_sql.mask.cache import MaskCache, MaskEntry
from grid_sql.mask.guide import Guide
from grid_sql.mask.walk import ScanFrame, kernels_enabled
from grid_sql.parser import Configuration, accepts
from grid_sql.policy import AppPolicy, narrow, open_sqlite, sqlite_baseline
from grid_sql.policy.grammar import role_grammar
from grid_sql.schema import introspect

from ..mask.helpers import vocab

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"
CHINOOK = DATA / "chinook" / "Chinook_Sqlite.sqlite"

CHINOOK_SQL = [
    b"SELECT FirstName, Total FROM Customer c JOIN Invoice i ON c.CustomerId = i.CustomerId "
    b"ORDER BY Total DESC LIMIT 5",
    b'select "Name" from artist where ArtistId < 10',
]


@functools.cache
def grammar(name: str) -> Grammar:
    """``sqlite``: the SQLite dialect grammar; ``chinook``: a select-only Chinook role with
    the Employee table denied (schema lexicon with bare-case folding)."""
    if name == "sqlite":
        return Grammar.dialect("sqlite")
    if name == "chinook":
        engine = open_sqlite(CHINOOK)
        snap = introspect(engine)
        app = AppPolicy.from_mapping(
            {"verbs": ["select"], "tables": {"deny": ["Employee"]}}, origin="test"
        )
        policy = narrow(sqlite_baseline(snap), app, snap)
        return role_grammar(Grammar.dialect("sqlite"), snap, policy)
    raise KeyError(name)


@functools.cache
def spider_statements(n: int, max_len: int = 90) -> tuple[bytes, ...]:
    """``n`` Spider dev gold statements spread over the file (every k-th distinct one that
    the SQLite grammar accepts and is at most ``max_len`` bytes)."""
    lines = (DATA / "spider" / "dev_gold.sql").read_text().splitlines()
    sql = list(dict.fromkeys(line.split("\t")[0].encode() for line in lines if line.strip()))
    g = grammar("sqlite")
    out: list[bytes] = []
    stride = max(1, len(sql) // (4 * n))
    for s in sql[::stride]:
        if len(s) <= max_len and accepts(g, s):
            out.append(s)
        if len(out) == n:
            break
    assert len(out) == n
    return tuple(out)


def statements(gname: str, n: int) -> tuple[bytes, ...]:
    return spider_statements(n) if gname == "sqlite" else tuple(CHINOOK_SQL[:n])


def guide_pair(gname: str, vname: str) -> tuple[Guide, Guide]:
    """(kernel guide, Python-walk guide), fresh caches, one shared trie. The kernel guide
    also fills in Rust (``Guide.filler``) when its grammar has no scope rules; the other is
    the Python reference throughout."""
    assert kernels_enabled(), "grid_sql._kernels lacks TrieWalker (run `make ext`)"
    g = grammar(gname)
    gk = Guide(g, vocab(vname), cache=MaskCache())
    gp = Guide(g, vocab(vname), cache=MaskCache(), trie=gk.trie)
    gk.walker.use_kernel = True
    gp.walker.use_kernel = False
    return gk, gp


def check_root_walk(gk: Guide, gp: Guide, cfg: Configuration) -> int:
    """Kernel vs Python walk at the root of ``cfg``: identical ids, residue (order
    included) and visit count. The Python result is published to ``gp``'s cache (exactly
    what a miss would publish) so the following mask fill does not walk twice. Returns
    the residue length."""
    key = gk.key_for(cfg, 0)
    s = cfg.scan
    frame = ScanFrame(s.dfa, s.rem, s.la_len, s.la_state)
    rk = gk.walker.walk_kernel(0, frame, key.allowed)
    rp = gp.walker.walk_py(0, frame, key.allowed)
    assert rk.ci_ids.dtype == rp.ci_ids.dtype
    np.testing.assert_array_equal(rk.ci_ids, rp.ci_ids)
    assert rk.residue == rp.residue
    assert rk.nodes_visited == rp.nodes_visited
    if gp.cache.get(gp.namespace, key) is None:
        residue = tuple((c.node, c.terminal, c.requeue) for c in rp.residue)
        gp.cache.publish(gp.namespace, MaskEntry.make(key, rp.ci_ids, residue))
    return len(rk.residue)


def check_masks(gk: Guide, gp: Guide, cfg: Configuration) -> tuple[int, int]:
    """Full masks (CI ∪ CD ∪ EOS) and the consulted entry ids agree; (count, #entries)."""
    bk = np.full(gk.n_words, -1, dtype=np.int32)
    bp = np.zeros(gp.n_words, dtype=np.int32)
    nk, ek = gk.fill_bitmask(cfg, bk)
    np_, ep = gp.fill_bitmask(cfg, bp)
    np.testing.assert_array_equal(bk, bp)
    assert nk == np_
    assert ek == ep
    return nk, len(ek)
