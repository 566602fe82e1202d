"""The token trie (paper Definition 3): all non-special token spellings in one byte trie.

Why a trie: the exact mask (Definition 4) asks, for every token ``t``, whether
``w · bytes(t)`` is still a viable prefix. Tokens sharing a spelling prefix share that
work, and rejection is monotone under extension, so a DFS over the trie can skip a rejected
prefix's whole subtree at once. Why one DFS-contiguous array: the subtree of node ``i`` is
exactly the index range ``[i, i + size[i])``, so "skip the subtree" is one addition, the
walk touches memory sequentially, and the same buffer can be handed to the Rust kernel
without conversion.

Layout (all arrays read-only, little-endian):

* ``nodes``: structured array, ``NODE_DTYPE`` (12 bytes per node), in DFS preorder; node 0
  is the root (empty prefix, ``byte`` 0, ``depth`` 0). Per node:

  - ``byte``  -- the edge byte from the parent (the last byte of the node's prefix);
  - ``depth`` -- the prefix length in bytes;
  - ``token`` -- the smallest token id whose spelling is exactly this prefix, or -1;
  - ``size``  -- the number of nodes in the subtree, the node included.

  Children of a node appear in ascending byte order. The paper packs the first three fields
  into 8 bytes; here ``depth`` is kept too and fields stay naturally aligned for numpy.
* alias table (CSR over nodes): ``alias_ids[alias_offsets[i]:alias_offsets[i + 1]]`` are
  *all* ids spelled exactly as node ``i``'s prefix (ascending; empty for inner nodes).
  Masks are over ids, so every accepted spelling expands to its whole alias class.
  Because ``alias_ids`` is ordered by (spelling, id), all ids whose spelling *extends* the
  prefix of node ``i`` form the contiguous slice
  ``alias_ids[alias_offsets[i]:alias_offsets[i + size[i]]]``: accepting a subtree wholesale
  is one slice too.

Special ids (EOS included) are not in the trie: they are permanently masked, and EOS enters
masks only through the grammar's EOS gate. Non-special tokens with an *empty* spelling are
excluded as well (listed in :attr:`TokenTrie.excluded_empty_ids`): emitting one would not
advance the output, so admitting it could stall generation forever.
"""

from __future__ import annotations

import hashlib
import operator
import threading
from collections import OrderedDict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from grid_sql.errors import TokenizerError
from grid_sql.mask.vocab import Vocabulary
from grid_sql.store import entry_path, read_framed, write_framed

__all__ = ["NODE_DTYPE", "TokenTrie", "get_token_trie"]

NODE_DTYPE: np.dtype[np.void] = np.dtype(
    {
        "names": ["byte", "depth", "token", "size"],
        "formats": ["u1", "<u2", "<i4", "<u4"],
        "offsets": [0, 2, 4, 8],
        "itemsize": 12,
    }
)

_kernel_lock = threading.Lock()  # builds of TokenTrie.kernel_arrays
_MAX_DEPTH = 0xFFFF  # depth is a u2 field
_I32_MAX = 0x7FFFFFFF


class TokenTrie:
    """A byte trie over a vocabulary's non-special spellings, one DFS-contiguous array.

    Build with :meth:`build` (or :func:`get_token_trie`, which caches one trie per
    vocabulary fingerprint). Instances are immutable and picklable.
    """

    __slots__ = (
        "_nodes",
        "_alias_offsets",
        "_alias_ids",
        "_vocabulary",
        "_fingerprint",
        "_excluded_empty_ids",
        "_kernel_arrays",
    )

    _nodes: npt.NDArray[np.void]
    _alias_offsets: npt.NDArray[np.uint32]
    _alias_ids: npt.NDArray[np.int32]
    _vocabulary: Vocabulary
    _fingerprint: str
    _excluded_empty_ids: tuple[int, ...]
    _kernel_arrays: Any  # _kernels.TokenTrieArrays, built on first use (not pickled)

    def __init__(
        self,
        vocabulary: Vocabulary,
        nodes: npt.NDArray[np.void],
        alias_offsets: npt.NDArray[np.uint32],
        alias_ids: npt.NDArray[np.int32],
    ) -> None:
        """Wrap already-built arrays (use :meth:`build`); the arrays are made read-only."""
        for arr in (nodes, alias_offsets, alias_ids):
            arr.setflags(write=False)
        set_ = object.__setattr__
        set_(self, "_nodes", nodes)
        set_(self, "_alias_offsets", alias_offsets)
        set_(self, "_alias_ids", alias_ids)
        set_(self, "_vocabulary", vocabulary)
        set_(self, "_excluded_empty_ids", vocabulary.empty_ids)
        set_(self, "_kernel_arrays", None)
        h = hashlib.blake2b(digest_size=32)
        h.update(b"grid-sql/token-trie/v1\x00")
        h.update(NODE_DTYPE.descr.__repr__().encode())
        h.update(vocabulary.fingerprint.encode("ascii"))
        set_(self, "_fingerprint", h.hexdigest())

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("TokenTrie is immutable")

    def __getstate__(self) -> dict[str, object]:
        return {name: getattr(self, name) for name in self.__slots__ if name != "_kernel_arrays"}

    def __setstate__(self, state: dict[str, object]) -> None:
        object.__setattr__(self, "_kernel_arrays", None)
        for name, value in state.items():
            if isinstance(value, np.ndarray):
                value = value.copy()  # unpickled arrays may be writable views
                value.setflags(write=False)
            object.__setattr__(self, name, value)

    # -- construction --------------------------------------------------------------------

    @classmethod
    def build(cls, vocabulary: Vocabulary) -> TokenTrie:
        """Build the trie from sorted spellings with numpy, without a per-byte Python loop.

        Sorting the (spelling, id) pairs lexicographically makes the DFS preorder fall out
        directly: the nodes contributed by the k-th distinct spelling ``u_k`` are its
        prefixes longer than ``lcp(u_{k-1}, u_k)``, in order. Parents are found by one
        ``searchsorted`` (the parent of a node is the last earlier node one level up) and
        subtree sizes are summed bottom-up one depth level at a time.
        """
        tb = vocabulary.token_bytes
        special = vocabulary.special_ids
        if vocabulary.size > _I32_MAX:
            raise TokenizerError(f"vocabulary of {vocabulary.size} ids does not fit int32 ids")

        tok_len = np.fromiter(map(len, tb), dtype=np.int64, count=len(tb))
        keep = tok_len > 0
        if special:
            keep[np.fromiter(special, dtype=np.int64, count=len(special))] = False
        ids: list[int] = np.flatnonzero(keep).tolist()
        ids.sort(key=tb.__getitem__)  # stable: ascending ids within an alias class
        spellings = list(map(tb.__getitem__, ids))
        n_tok = len(ids)

        # Alias classes = runs of equal spellings.
        first = np.ones(n_tok, dtype=bool)
        if n_tok > 1:
            first[1:] = list(map(operator.ne, spellings[1:], spellings[:-1]))
        class_starts = np.flatnonzero(first)
        uniq = list(map(spellings.__getitem__, class_starts.tolist()))
        m = len(uniq)
        class_sizes = np.diff(np.append(class_starts, n_tok))
        alias_ids = np.asarray(ids, dtype=np.int32)

        lengths = np.fromiter(map(len, uniq), dtype=np.int64, count=m)
        if m and int(lengths.max()) > _MAX_DEPTH:
            raise TokenizerError(f"a token spelling is longer than {_MAX_DEPTH} bytes")
        blob = np.frombuffer(b"".join(uniq), dtype=np.uint8)
        starts = np.zeros(m, dtype=np.int64)
        if m > 1:
            starts[1:] = np.cumsum(lengths)[:-1]

        # lcp[k] = longest common prefix of u_{k-1} and u_k, one byte column at a time over
        # the pairs still matching (total work = sum of the lcps).
        lcp = np.zeros(m, dtype=np.int64)
        if m > 1:
            a_off, b_off = starts[:-1], starts[1:]
            limit = np.minimum(lengths[:-1], lengths[1:])
            active = np.arange(m - 1)
            col = 0
            while active.size:
                active = active[limit[active] > col]
                active = active[blob[a_off[active] + col] == blob[b_off[active] + col]]
                lcp[active + 1] += 1
                col += 1

        # New nodes per distinct spelling (>= 1: spellings are distinct and non-empty).
        new = lengths - lcp
        n_nodes = 1 + int(new.sum())
        run_start = np.cumsum(new) - new  # index (without the root) of u_k's first new node
        owner = np.repeat(np.arange(m), new)
        within = np.arange(n_nodes - 1) - np.repeat(run_start, new)
        depth = np.empty(n_nodes, dtype=np.int64)
        depth[0] = 0
        depth[1:] = np.repeat(lcp, new) + 1 + within

        nodes = np.zeros(n_nodes, dtype=NODE_DTYPE)
        nodes["depth"] = depth
        nodes["byte"][1:] = blob[starts[owner] + depth[1:] - 1]
        token = np.full(n_nodes, -1, dtype=np.int32)
        terminal = run_start + new  # last new node of u_k, +1 for the root
        token[terminal] = alias_ids[class_starts]
        nodes["token"] = token

        # Parent of node i = last node before i at depth(i) - 1 (DFS preorder property).
        # Within a run of new nodes that is simply i - 1; only each run's first node needs
        # a search, over the nodes sorted by (depth, index).
        order = np.argsort(depth, kind="stable")
        keys = depth[order] * n_nodes + order
        parent = np.arange(-1, n_nodes - 1, dtype=np.int64)
        heads = run_start + 1
        parent[heads] = order[np.searchsorted(keys, (depth[heads] - 1) * n_nodes + heads) - 1]

        size = np.ones(n_nodes, dtype=np.int64)
        level_bounds = np.cumsum(np.bincount(depth))
        for d in range(len(level_bounds) - 1, 0, -1):
            level = order[level_bounds[d - 1] : level_bounds[d]]
            np.add.at(size, parent[level], size[level])
        nodes["size"] = size

        alias_offsets = np.zeros(n_nodes + 1, dtype=np.uint32)
        counts = np.zeros(n_nodes, dtype=np.int64)
        counts[terminal] = class_sizes
        alias_offsets[1:] = np.cumsum(counts)
        return cls(vocabulary, nodes, alias_offsets, alias_ids)

    # -- the Rust kernel's copy ------------------------------------------------------------

    def kernel_arrays(self) -> Any:
        """The trie as ``_kernels.TokenTrieArrays``, built once per trie on first use.

        Every Rust walker of this vocabulary (one per grammar runtime, i.e. per role and per
        scoped lexicon view) references this one object instead of copying the arrays: the
        copy cost 4 ms (GPT-2) / 13 ms (Qwen2) of CPU and 1.28 / 4.28 MB per guide.
        """
        k = self._kernel_arrays
        if k is None:
            with _kernel_lock:
                k = self._kernel_arrays
                if k is None:
                    from grid_sql import _kernels

                    nodes = self._nodes
                    k = _kernels.TokenTrieArrays(
                        np.ascontiguousarray(nodes["byte"]).tobytes(),
                        np.ascontiguousarray(nodes["depth"], dtype="<u2").tobytes(),
                        np.ascontiguousarray(nodes["size"], dtype="<u4").tobytes(),
                        np.ascontiguousarray(self._alias_offsets, dtype="<u4").tobytes(),
                        np.ascontiguousarray(self._alias_ids, dtype="<i4").tobytes(),
                    )
                    object.__setattr__(self, "_kernel_arrays", k)
        return k

    # -- accessors ------------------------------------------------------------------------

    @property
    def nodes(self) -> npt.NDArray[np.void]:
        """The DFS-ordered node array (fields ``byte``, ``depth``, ``token``, ``size``)."""
        return self._nodes

    @property
    def alias_offsets(self) -> npt.NDArray[np.uint32]:
        """CSR row pointers over nodes into :attr:`alias_ids` (length ``num_nodes + 1``)."""
        return self._alias_offsets

    @property
    def alias_ids(self) -> npt.NDArray[np.int32]:
        """Every trie token id, ordered by (spelling, id) = DFS order of their nodes."""
        return self._alias_ids

    @property
    def vocabulary(self) -> Vocabulary:
        return self._vocabulary

    @property
    def vocab_fingerprint(self) -> str:
        return self._vocabulary.fingerprint

    @property
    def fingerprint(self) -> str:
        """Hex BLAKE2b-256 over a domain tag, the node layout and the vocabulary fingerprint.

        The trie is a pure function of the vocabulary, so this content-addresses it.
        """
        return self._fingerprint

    @property
    def excluded_empty_ids(self) -> tuple[int, ...]:
        """Non-special ids left out because their spelling is empty (never in a mask)."""
        return self._excluded_empty_ids

    @property
    def num_nodes(self) -> int:
        return len(self._nodes)

    @property
    def num_tokens(self) -> int:
        """Number of token ids in the trie (alias classes expanded)."""
        return len(self._alias_ids)

    @property
    def num_spellings(self) -> int:
        """Number of distinct spellings (= nodes with ``token >= 0``)."""
        return int(np.count_nonzero(self._nodes["token"] >= 0))

    @property
    def nbytes(self) -> int:
        """Memory held by the trie's arrays, in bytes."""
        return int(self._nodes.nbytes + self._alias_offsets.nbytes + self._alias_ids.nbytes)

    def __repr__(self) -> str:
        return (
            f"TokenTrie(nodes={self.num_nodes}, tokens={self.num_tokens}, "
            f"nbytes={self.nbytes}, fingerprint={self._fingerprint[:16]}…)"
        )

    # -- queries ----------------------------------------------------------------------------

    def children(self, node: int) -> Iterator[int]:
        """Indices of ``node``'s children, in ascending edge-byte order."""
        size = self._nodes["size"]
        end = node + int(size[node])
        i = node + 1
        while i < end:
            yield i
            i += int(size[i])

    def find_node(self, prefix: bytes) -> int:
        """The node whose path spells ``prefix`` (a token or just a token prefix), or -1."""
        edge = self._nodes["byte"]
        size = self._nodes["size"]
        node = 0
        for b in prefix:
            end = node + int(size[node])
            i = node + 1
            while i < end:
                e = int(edge[i])
                if e == b:
                    break
                if e > b:  # children are sorted: b is absent
                    return -1
                i += int(size[i])
            else:
                return -1
            node = i
        return node

    def ids_at(self, node: int) -> npt.NDArray[np.int32]:
        """All ids spelled exactly as ``node``'s prefix (its alias class; may be empty)."""
        off = self._alias_offsets
        return self._alias_ids[int(off[node]) : int(off[node + 1])]

    def subtree_ids(self, node: int) -> npt.NDArray[np.int32]:
        """All ids whose spelling starts with ``node``'s prefix: one contiguous slice."""
        off = self._alias_offsets
        end = node + int(self._nodes["size"][node])
        return self._alias_ids[int(off[node]) : int(off[end])]

    def lookup(self, spelling: bytes) -> list[int]:
        """All token ids spelled exactly ``spelling`` (ascending), found by walking the trie."""
        node = self.find_node(spelling)
        if node <= 0:  # absent, or the root (no token has the empty spelling)
            return []
        return [int(i) for i in self.ids_at(node)]

    def iter_tokens(self) -> Iterator[tuple[bytes, list[int]]]:
        """Yield ``(spelling, ids)`` for every alias class, in DFS (lexicographic) order.

        The spelling is rebuilt from the edge bytes along the path, so this exercises the
        array layout itself (for tests and debugging; the mask walk never needs it).
        """
        edge = self._nodes["byte"].tolist()
        depth = self._nodes["depth"].tolist()
        token = self._nodes["token"].tolist()
        off = self._alias_offsets.tolist()
        ids = self._alias_ids.tolist()
        path = bytearray()
        for i in range(1, len(edge)):
            del path[depth[i] - 1 :]
            path.append(edge[i])
            if token[i] >= 0:
                yield bytes(path), ids[off[i] : off[i + 1]]


# -- one trie per vocabulary fingerprint --------------------------------------------------

_CACHE_SIZE = 8
_cache: OrderedDict[str, TokenTrie] = OrderedDict()
_cache_lock = threading.Lock()


def get_token_trie(vocabulary: Vocabulary) -> TokenTrie:
    """The token trie for ``vocabulary``, built once per vocabulary fingerprint.

    A small LRU (8 vocabularies) because serving processes typically hold one or two
    tokenizers and a 262k-token trie is ~10 MB. Built tries are also kept on disk beside
    the grammar store (``<cache>/tries/v1/<fp[:2]>/<fp>.bin``, ``GRID_SQL_CACHE_DIR``;
    ``off`` disables): a later process reads the arrays instead of sorting the vocabulary
    again (~0.1 s CPU for GPT-2, ~0.45 s for Qwen2). An entry is used only if its
    vocabulary fingerprint, layout and array lengths match and its BLAKE2b digest checks;
    otherwise it is rebuilt and rewritten.
    """
    key = vocabulary.fingerprint
    with _cache_lock:
        trie = _cache.get(key)
        if trie is not None:
            _cache.move_to_end(key)
            return trie
    trie = _load_stored(vocabulary)
    if trie is None:
        trie = TokenTrie.build(vocabulary)
        _store(trie)
    with _cache_lock:
        _cache[key] = trie
        _cache.move_to_end(key)
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    return trie


# -- on-disk store ------------------------------------------------------------------------

_MAGIC = b"GRIDSQL-TRIE\x00"
_STORE_FORMAT = 1


def _entry_path(vocab_fp: str) -> Path | None:
    return entry_path("tries", _STORE_FORMAT, vocab_fp, ".bin")


_PERSON = b"grid-sql-trie"


def _store(trie: TokenTrie) -> None:
    p = _entry_path(trie.vocab_fingerprint)
    if p is None:
        return
    parts = (trie.nodes.tobytes(), trie.alias_offsets.tobytes(), trie.alias_ids.tobytes())
    head = {
        "format": _STORE_FORMAT,
        "vocab": trie.vocab_fingerprint,
        "layout": repr(NODE_DTYPE.descr),
    }
    write_framed(p, _MAGIC, head, parts, _PERSON)


def _load_stored(vocabulary: Vocabulary) -> TokenTrie | None:
    """The stored trie of ``vocabulary``, or None (absent, disabled, damaged, foreign)."""
    p = _entry_path(vocabulary.fingerprint)
    if p is None:
        return None
    entry = read_framed(p, _MAGIC, 3, _PERSON)
    if entry is None:
        return None
    head, (nodes_b, off_b, ids_b) = entry
    try:
        if (
            head["format"] != _STORE_FORMAT
            or head["vocab"] != vocabulary.fingerprint
            or head["layout"] != repr(NODE_DTYPE.descr)
            or len(nodes_b) % NODE_DTYPE.itemsize
            or len(off_b) != (len(nodes_b) // NODE_DTYPE.itemsize + 1) * 4
            or len(ids_b) % 4
        ):
            return None
        nodes = np.frombuffer(nodes_b, dtype=NODE_DTYPE)
        alias_offsets = np.frombuffer(off_b, dtype="<u4").astype(np.uint32, copy=False)
        alias_ids = np.frombuffer(ids_b, dtype="<i4").astype(np.int32, copy=False)
        if int(alias_offsets[-1]) != len(alias_ids) or int(nodes["size"][0]) != len(nodes):
            return None
    except (ValueError, KeyError, TypeError, IndexError):
        return None
    return TokenTrie(vocabulary, nodes, alias_offsets, alias_ids)
