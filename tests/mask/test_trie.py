"""The token trie (paper Definition 3) against real vocabularies and a naive dict model."""

from __future__ import annotations

import functools
import os
import pickle
import random
import time
import warnings
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grid_sql.mask.trie import NODE_DTYPE, TokenTrie, get_token_trie
from grid_sql.mask.vocab import Vocabulary, VocabularyIncompleteWarning

TOKENIZERS = Path(os.environ.get("GRID_SQL_TOKENIZER_DIR", "/work/shared/data/tokenizers"))


@functools.cache
def load_vocab(name: str) -> Vocabulary:
    path = TOKENIZERS / f"ggml-vocab-{name}.gguf"
    if not path.exists():
        pytest.skip(f"{path} not available")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", VocabularyIncompleteWarning)
        return Vocabulary.from_gguf(path)


@functools.cache
def load_trie(name: str) -> TokenTrie:
    return TokenTrie.build(load_vocab(name))


def naive_classes(vocab: Vocabulary) -> dict[bytes, list[int]]:
    """The model: spelling -> ascending ids, over non-special non-empty tokens."""
    out: dict[bytes, list[int]] = defaultdict(list)
    for i, t in enumerate(vocab.token_bytes):
        if t and i not in vocab.special_ids:
            out[t].append(i)
    return dict(out)


def check_structure(trie: TokenTrie, vocab: Vocabulary) -> None:
    """Every Definition-3 invariant, re-derived independently of the build.

    A stack of open ancestors recovers each node's parent and path from the *sizes* alone
    (not from ``depth``), so the check also validates the depth field and the DFS order.
    """
    nodes = trie.nodes
    edge = nodes["byte"].tolist()
    depth = nodes["depth"].tolist()
    token = nodes["token"].tolist()
    size = nodes["size"].tolist()
    off = trie.alias_offsets.tolist()
    alias = trie.alias_ids.tolist()
    n = len(edge)
    assert nodes.dtype == NODE_DTYPE and NODE_DTYPE.itemsize == 12
    assert size[0] == n and depth[0] == 0 and token[0] == -1  # the root spans everything
    assert len(off) == n + 1 and off[0] == 0 and off[-1] == len(alias)

    classes = naive_classes(vocab)
    seen: dict[bytes, int] = {}
    # Stack entries: (node, subtree end, path bytes, last child byte).
    stack: list[list] = [[0, n, b"", -1]]
    for i in range(1, n):
        while stack[-1][1] <= i:
            stack.pop()
        parent = stack[-1]
        end = i + size[i]
        assert size[i] >= 1 and end <= parent[1], f"subtree of {i} overflows its parent"
        assert edge[i] > parent[3], f"children of {parent[0]} not strictly ascending"
        parent[3] = edge[i]
        path = parent[2] + bytes([edge[i]])
        assert depth[i] == len(path)
        ids = alias[off[i] : off[i + 1]]
        if token[i] >= 0:
            assert path not in seen, f"spelling {path!r} at two nodes"
            seen[path] = i
            assert ids == classes[path], path  # the whole alias class, ascending
            assert token[i] == ids[0]
        else:
            assert ids == [] and path not in classes
            assert size[i] > 1, f"leaf {i} ends no token"  # the trie has no dead branches
        stack.append([i, end, path, -1])
    assert seen.keys() == classes.keys()  # every non-special token at exactly one node
    assert sorted(alias) == sorted(i for ids in classes.values() for i in ids)
    assert not set(alias) & vocab.special_ids and vocab.eos_token_id not in alias


def check_subtree_slices(trie: TokenTrie, vocab: Vocabulary, sample: list[int]) -> None:
    """``subtree_ids`` = ids whose spelling extends the node's prefix (a contiguous slice)."""
    spellings = [(t, i) for t, ids in naive_classes(vocab).items() for i in ids]
    paths = dict((node, sp) for sp, node in _node_of(trie).items())
    for node in sample:
        prefix = paths.get(node)
        if prefix is None:
            continue
        expected = sorted(i for t, i in spellings if t.startswith(prefix))
        assert sorted(trie.subtree_ids(node).tolist()) == expected


def _node_of(trie: TokenTrie) -> dict[bytes, int]:
    """Every node's path (terminal or not), rebuilt from depth + edge bytes."""
    out: dict[bytes, int] = {b"": 0}
    path = bytearray()
    for i, (b, d) in enumerate(
        zip(trie.nodes["byte"].tolist(), trie.nodes["depth"].tolist(), strict=True)
    ):
        if i == 0:
            continue
        del path[d - 1 :]
        path.append(b)
        out[bytes(path)] = i
    return out


# ------------------------------------------------------------------------- real vocabularies


@pytest.mark.parametrize("name", ["gpt-2", "qwen2", "llama-spm", "phi-3"])
def test_real_vocabulary_trie_structure(name: str) -> None:
    vocab = load_vocab(name)
    trie = load_trie(name)
    check_structure(trie, vocab)
    assert dict(trie.iter_tokens()) == naive_classes(vocab)
    assert trie.num_tokens == sum(map(len, naive_classes(vocab).values()))
    assert trie.num_spellings == len(naive_classes(vocab))


@pytest.mark.parametrize("name", ["gpt-2", "qwen2", "llama-spm"])
def test_real_vocabulary_lookup(name: str) -> None:
    vocab = load_vocab(name)
    trie = load_trie(name)
    classes = naive_classes(vocab)
    rng = random.Random(1234)
    for spelling in rng.sample(sorted(classes), 1500):
        assert trie.lookup(spelling) == classes[spelling]
    for i in vocab.special_ids:  # special spellings are absent unless a normal token shares one
        assert trie.lookup(vocab.token_bytes[i]) == classes.get(vocab.token_bytes[i], [])
    assert trie.lookup(b"") == []
    nodes = _node_of(trie)
    check_subtree_slices(
        trie, vocab, [nodes[p] for p in (b"", b" ", b"S", b"SE", b" SEL") if p in nodes]
    )


def test_known_alias_classes() -> None:
    spm = load_trie("llama-spm")
    assert spm.lookup(b" ") == [35, 29871]  # <0x20> and ▁
    assert spm.lookup(b"\n") == [13]
    node = spm.find_node(b" ")
    assert spm.nodes["token"][node] == 35 and spm.ids_at(node).tolist() == [35, 29871]
    gemma_vocab = load_vocab("gemma-4")
    classes = naive_classes(gemma_vocab)
    assert len(classes[b"A"]) == 2  # "A" and the byte-fallback <0x41>


def test_build_times_and_memory() -> None:
    """Measured on the shared 2-core box (see the report): GPT-2 ~0.1 s, Qwen2 ~0.4 s,
    Gemma-4 ~0.8 s. The bounds are loose so a loaded CI machine does not flake."""
    for name, budget in (("qwen2", 3.0), ("gemma-4", 10.0)):
        vocab = load_vocab(name)
        t0 = time.perf_counter()
        trie = TokenTrie.build(vocab)
        elapsed = time.perf_counter() - t0
        assert elapsed < budget, (name, elapsed)
        assert trie.nbytes == trie.nodes.nbytes + trie.alias_offsets.nbytes + trie.alias_ids.nbytes
        assert trie.nbytes < 64 * trie.num_tokens  # a few tens of bytes per token


def test_gemma_trie_is_exact() -> None:
    vocab = load_vocab("gemma-4")
    trie = load_trie("gemma-4")
    assert dict(trie.iter_tokens()) == naive_classes(vocab)
    sizes = trie.nodes["size"].astype(np.int64)
    idx = np.arange(trie.num_nodes)
    assert np.all(idx + sizes <= trie.num_nodes)


# ------------------------------------------------------------------------- fingerprints, API


def test_fingerprint_cache_pickle_and_immutability() -> None:
    vocab = load_vocab("llama-spm")
    trie = get_token_trie(vocab)
    assert get_token_trie(vocab) is trie
    assert trie.fingerprint == TokenTrie.build(vocab).fingerprint
    assert trie.vocab_fingerprint == vocab.fingerprint
    assert trie.fingerprint != load_trie("gpt-2").fingerprint
    assert len(trie.fingerprint) == 64
    with pytest.raises(ValueError):
        trie.nodes["token"][1] = 5
    with pytest.raises(AttributeError):
        trie.foo = 1  # type: ignore[attr-defined]
    kt = trie.kernel_arrays()  # the Rust copy: built once, shared, never pickled
    assert trie.kernel_arrays() is kt and kt.n_nodes == trie.num_nodes
    # per node: edge, depth, size, alias offset, the sink classes below it
    assert kt.nbytes == trie.num_nodes * 12 + 4 + 4 * len(trie.alias_ids)
    again = pickle.loads(pickle.dumps(trie))
    assert again.kernel_arrays() is not kt and again.kernel_arrays().n_nodes == kt.n_nodes
    assert again.fingerprint == trie.fingerprint
    assert np.array_equal(again.nodes, trie.nodes)
    assert again.lookup(b" ") == [35, 29871]
    with pytest.raises(ValueError):
        again.alias_ids[0] = 1
    assert "TokenTrie(" in repr(trie)


def test_children_order_and_find_node() -> None:
    trie = TokenTrie.build(
        Vocabulary.from_token_bytes(
            [b"b", b"a", b"ab", b"abc", b"abd", b"ab", b"z", b"<eos>"],
            eos_token_id=7,
            warn_incomplete=False,
        )
    )
    edge = trie.nodes["byte"]
    assert [bytes([edge[c]]) for c in trie.children(0)] == [b"a", b"b", b"z"]
    ab = trie.find_node(b"ab")
    assert [bytes([edge[c]]) for c in trie.children(ab)] == [b"c", b"d"]
    assert trie.ids_at(ab).tolist() == [2, 5]
    assert sorted(trie.subtree_ids(trie.find_node(b"a")).tolist()) == [1, 2, 3, 4, 5]
    assert trie.find_node(b"abx") == -1 and trie.find_node(b"c") == -1
    assert trie.find_node(b"") == 0
    assert trie.lookup(b"<eos>") == []


def test_special_and_empty_tokens_excluded() -> None:
    vocab = Vocabulary.from_token_bytes(
        [b"x", b"", b"y", b"<s>", b"</s>"], eos_token_id=4, special_ids=[3], warn_incomplete=False
    )
    trie = TokenTrie.build(vocab)
    assert trie.excluded_empty_ids == (1,)
    assert dict(trie.iter_tokens()) == {b"x": [0], b"y": [2]}
    assert trie.num_nodes == 3
    # A vocabulary with nothing emittable yields the bare root.
    only_eos = TokenTrie.build(
        Vocabulary.from_token_bytes([b"</s>"], eos_token_id=0, warn_incomplete=False)
    )
    assert only_eos.num_nodes == 1 and only_eos.num_tokens == 0
    assert list(only_eos.iter_tokens()) == [] and only_eos.lookup(b"a") == []


# ------------------------------------------------------------------------- property test

# A tiny alphabet (including 0x00 and 0xFF: NUL must not be lost by any padding trick) makes
# shared prefixes, alias classes and prefix-of-another-token cases common.
spellings = st.binary(min_size=0, max_size=6).map(
    lambda b: bytes(c % 4 if c % 3 else (0xFF if c % 2 else 0) for c in b)
)


@st.composite
def vocabularies(draw: st.DrawFn) -> Vocabulary:
    tokens = draw(st.lists(spellings, min_size=1, max_size=40))
    n = len(tokens)
    eos = draw(st.integers(0, n - 1))
    specials = draw(st.sets(st.integers(0, n - 1), max_size=max(0, n // 4)))
    return Vocabulary.from_token_bytes(
        tokens, eos_token_id=eos, special_ids=specials, warn_incomplete=False
    )


@settings(max_examples=300, deadline=None)
@given(vocab=vocabularies(), probes=st.lists(spellings, max_size=10))
def test_trie_matches_naive_dict(vocab: Vocabulary, probes: list[bytes]) -> None:
    trie = TokenTrie.build(vocab)
    classes = naive_classes(vocab)
    check_structure(trie, vocab)
    assert dict(trie.iter_tokens()) == classes
    assert [s for s, _ in trie.iter_tokens()] == sorted(classes)  # DFS = lexicographic order
    for s in list(classes) + probes:
        assert trie.lookup(s) == classes.get(s, [])
    nodes = _node_of(trie)
    for prefix, node in nodes.items():
        assert trie.find_node(prefix) == node
        expected = sorted(i for t, ids in classes.items() if t.startswith(prefix) for i in ids)
        assert sorted(trie.subtree_ids(node).tolist()) == expected
    assert set(trie.excluded_empty_ids) == set(vocab.empty_ids)
