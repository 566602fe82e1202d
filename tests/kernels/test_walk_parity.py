"""Kernel walk ≡ Python walk, and kernel masks ≡ Python masks, along real statements.

Every configuration reached while feeding Spider statements (SQLite dialect grammar) and
Chinook statements (a select-only role grammar with a bare-case-folding schema lexicon)
token by token is checked twice: the root walk (CI ids, CD residue in order, nodes
visited) and the full mask with its entry ids (which audit trails replay), over GPT-2,
Llama-2 (SPM), Qwen2 and Llama-3 vocabularies.
"""

from __future__ import annotations

import pytest

from grid_sql.mask.cache import MaskCache
from grid_sql.mask.guide import Guide
from grid_sql.mask.walk import Walker, kernels_enabled

from ..mask.helpers import greedy_tokens, vocab
from .helpers import CHINOOK_SQL, check_masks, check_root_walk, grammar, guide_pair, statements

CASES = [
    ("gpt-2", "sqlite", 2),
    ("gpt-2", "chinook", 1),
    ("llama-spm", "sqlite", 2),
    ("llama-spm", "chinook", 1),
    pytest.param("qwen2", "sqlite", 1, marks=pytest.mark.slow),
    pytest.param("qwen2", "chinook", 1, marks=pytest.mark.slow),
    pytest.param("llama-bpe", "sqlite", 1, marks=pytest.mark.slow),
    pytest.param("llama-bpe", "chinook", 1, marks=pytest.mark.slow),
]


@pytest.mark.parametrize(("vname", "gname", "n_statements"), CASES)
def test_kernel_walk_and_masks_equal_python(vname: str, gname: str, n_statements: int) -> None:
    gk, gp = guide_pair(gname, vname)
    steps = residue_steps = 0
    entries = 0
    for sql in statements(gname, n_statements):
        m = gk.matcher()
        for t in [*greedy_tokens(vname, sql), None]:
            residue_steps += check_root_walk(gk, gp, m.config) > 0
            _, n_entries = check_masks(gk, gp, m.config)
            entries += n_entries
            steps += 1
            if t is not None:
                m.accept_token(t)
        assert m.is_accepting()
    # the corpus must exercise the CD residue and the sub-walks below it
    assert residue_steps >= steps // 2, (residue_steps, steps)
    assert entries > steps, (entries, steps)


def test_env_switch_forces_the_python_walk(monkeypatch: pytest.MonkeyPatch) -> None:
    gk, _ = guide_pair("sqlite", "llama-spm")
    monkeypatch.setenv("GRID_SQL_KERNELS", "0")
    assert not kernels_enabled()
    assert not Walker(gk.runtime, gk.trie).use_kernel
    monkeypatch.setenv("GRID_SQL_KERNELS", "1")
    assert kernels_enabled() and Walker(gk.runtime, gk.trie).use_kernel


def test_walkers_share_one_trie_and_one_dfa() -> None:
    """Guides of one vocabulary reference one Rust trie, grammars over one lexer one Rust
    DFA (the role grammar keeps the dialect's lexer but not its ignored comments); a role
    guide built after a dialect guide still walks exactly like the Python reference."""
    from grid_sql.mask.walk import scan_dfa

    dialect = Guide(grammar("sqlite"), vocab("gpt-2"), cache=MaskCache())
    dialect.walker.kernel()
    gk, gp = guide_pair("chinook", "gpt-2")
    assert gk.trie is dialect.trie
    assert gk.runtime.grammar.lexer is dialect.runtime.grammar.lexer
    assert gk.runtime.ignored_mask != dialect.runtime.ignored_mask
    nw = gk.walker.n_words
    assert scan_dfa(gk.runtime, nw) is scan_dfa(dialect.runtime, nw)
    assert gk.trie.kernel_arrays() is dialect.trie.kernel_arrays()
    assert gk.trie.kernel_arrays().n_nodes == gk.trie.num_nodes
    m = gk.matcher()
    for t in [*greedy_tokens("gpt-2", CHINOOK_SQL[1]), None]:
        check_root_walk(gk, gp, m.config)
        check_masks(gk, gp, m.config)
        if t is not None:
            m.accept_token(t)
    assert m.is_accepting()


def test_kernel_rejects_bad_arguments() -> None:
    gk, _ = guide_pair("sqlite", "llama-spm")
    k = gk.walker.kernel()
    allowed = (1).to_bytes(gk.walker.n_words * 8, "little")
    with pytest.raises(ValueError, match="out of range"):
        k.walk(gk.trie.num_nodes, 1, b"", -1, 0, allowed)
    with pytest.raises(ValueError, match="out of range"):
        k.walk(0, k.n_states, b"", -1, 0, allowed)
    with pytest.raises(ValueError, match="exceeds"):
        k.walk(0, 1, b"", 3, 0, allowed)
    with pytest.raises(ValueError, match="allowed"):
        k.walk(0, 1, b"", -1, 0, b"\x01\x02\x03")
