"""The write-back mask cache, keyed on configurations (paper §4.3, Definition 5).

Entries are immutable and content addressed: ``entry_id = BLAKE2b-128(key ‖ encoding tag ‖
payload)``, so two racing writers of one key produce the same id, and a writer that
produces a *different* payload for an existing key has found a soundness bug (OBL-KEY1) and
raises. Identifier-position keys (the allowed set meets a lexicon category) are a distinct
key kind carrying the schema-lexicon fingerprint; consulting an entry of the other kind at
an identifier position raises in every build (paper Proposition 6).
"""

from __future__ import annotations

import hashlib
import struct
import threading
import weakref
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import MaskError

KIND_GENERIC = "generic"
KIND_IDENT = "ident"


@dataclass(frozen=True, slots=True)
class MaskKey:
    """Definition 5: (kind, trie node, remainder, allowed set, schema fingerprint), plus
    the fingerprint of the scoped lexicon view at identifier positions of a grammar with
    scope-aware lexicons (None otherwise: keys of unscoped grammars are unchanged)."""

    kind: str
    node: int
    remainder: bytes
    allowed: int  # bitmask over terminal ids (the sorted allowed set, packed)
    schema_fp: str | None
    scope: str | None = None

    def encode(self) -> bytes:
        a = self.allowed.to_bytes((self.allowed.bit_length() + 7) // 8 or 1, "little")
        fp = (self.schema_fp or "").encode()
        return b"".join(
            [
                self.kind.encode(),
                b"\0",
                struct.pack("<iI", self.node, len(self.remainder)),
                self.remainder,
                struct.pack("<I", len(a)),
                a,
                fp,
                b"" if self.scope is None else b"\0scope:" + self.scope.encode(),
            ]
        )


def _slot(namespace: str, key: MaskKey) -> tuple[Any, ...]:
    """The cache's dict key for ``key`` under ``namespace`` (see ``MaskCache._entries``)."""
    return (namespace, key.kind, key.node, key.remainder, key.allowed, key.schema_fp, key.scope)


@dataclass(frozen=True, slots=True)
class PackedWords:
    """The CI ids of an entry pre-packed as XGrammar-layout bitmask words.

    Dense (``index`` is None: ``words`` holds all ``n_words``) when more than a quarter of
    the words are non-zero, else sparse (``words[k]`` belongs at word ``index[k]``), so a
    two-id entry on a 151k vocabulary costs 8 bytes instead of 19 KB. Either way a hit ORs
    words into the mask instead of re-packing ids.
    """

    n_words: int
    words: np.ndarray  # uint32
    index: np.ndarray | None  # intp word indices (sparse) or None (dense)

    @staticmethod
    def pack(ids: np.ndarray, n_words: int) -> PackedWords:
        ids = np.asarray(ids, dtype=np.int64)
        if ids.size and (int(ids.min()) < 0 or int(ids.max()) >= n_words * 32):
            raise MaskError(f"token ids outside a {n_words}-word bitmask")
        if ids.size * 4 <= n_words:  # surely sparse: pack only the touched words
            nz, inv = np.unique(ids >> 5, return_inverse=True)
            words = np.zeros(nz.size, dtype=np.uint32)
            np.bitwise_or.at(words, inv, np.uint32(1) << (ids & 31).astype(np.uint32))
            words.setflags(write=False)
            nz = nz.astype(np.intp)
            nz.setflags(write=False)
            return PackedWords(n_words, words, nz)
        bits = np.zeros(n_words * 32, dtype=np.uint8)
        bits[ids] = 1
        dense = np.packbits(bits, bitorder="little").view("<u4").astype(np.uint32)
        nz = np.flatnonzero(dense)
        if nz.size * 4 > n_words:
            dense.setflags(write=False)
            return PackedWords(n_words, dense, None)
        words = dense[nz]
        words.setflags(write=False)
        nz.setflags(write=False)
        return PackedWords(n_words, words, nz)

    def or_into(self, out: np.ndarray) -> None:
        """``out |= self`` (``out``: uint32 words, at least ``n_words`` long)."""
        if self.index is None:
            out[: self.n_words] |= self.words
        elif self.words.size:
            out[self.index] |= self.words

    @property
    def nbytes(self) -> int:
        return int(self.words.nbytes) + (0 if self.index is None else int(self.index.nbytes))


@dataclass(frozen=True, slots=True)
class MaskEntry:
    """An immutable cache entry: CI ids plus the CD residue (trie node, terminal, requeue).

    ``packed(n_words)`` adds the CI ids as bitmask words, computed once on first use and
    kept with the entry (not part of its identity: the entry id hashes ids and residue).
    """

    key: MaskKey
    ci_ids: np.ndarray
    residue: tuple[tuple[int, int, bytes], ...]
    entry_id: str = field(default="")
    _packed: PackedWords | None = field(default=None, compare=False, repr=False)
    _classes: tuple[tuple[tuple[int, bytes], ...], tuple[int, ...]] | None = field(
        default=None, compare=False, repr=False
    )
    # the same refined by emitted identifier lexemes (guide.py, scope-aware lexicons)
    _scoped_classes: Any = field(default=None, compare=False, repr=False)

    def classes(self) -> tuple[tuple[tuple[int, bytes], ...], tuple[int, ...]]:
        """The residue's verdict-equivalence classes: distinct (terminal, requeue) pairs in
        first-seen order, and each residue entry's class index (computed once)."""
        c = self._classes
        if c is None:
            index: dict[tuple[int, bytes], int] = {}
            of = tuple(index.setdefault((t, r), len(index)) for _, t, r in self.residue)
            c = (tuple(index), of)
            object.__setattr__(self, "_classes", c)  # benign race: equal values
        return c

    def packed(self, n_words: int) -> PackedWords:
        p = self._packed
        if p is None or p.n_words != n_words:
            p = PackedWords.pack(self.ci_ids, n_words)
            object.__setattr__(self, "_packed", p)  # benign race: equal values
        return p

    @staticmethod
    def make(
        key: MaskKey, ci_ids: np.ndarray, residue: tuple[tuple[int, int, bytes], ...]
    ) -> MaskEntry:
        h = hashlib.blake2b(digest_size=16, person=b"grid-sql-entry")
        h.update(key.encode())
        ids = np.ascontiguousarray(ci_ids, dtype="<i4")
        h.update(ids_payload(ids))
        h.update(struct.pack("<I", len(residue)))
        for node, term, requeue in residue:
            h.update(struct.pack("<iiI", node, term, len(requeue)))
            h.update(requeue)
        ids.setflags(write=False)
        return MaskEntry(key, ids, residue, h.hexdigest())

    @property
    def nbytes(self) -> int:
        """Bytes held: ids, residue, and the packed words a hit uses, counted at their bound
        (16 bytes per id: dense only when 4 * non-zero words > n_words, sparse costs 12 per
        non-zero word) so that the value does not change once the words exist."""
        ids = int(self.ci_ids.size)
        return 20 * ids + sum(12 + len(r[2]) for r in self.residue) + 128


def ids_payload(ids: np.ndarray) -> bytes:
    """The canonical bytes of an entry's CI ids in its content address (entry id).

    A list of little-endian int32 ids, or, when that would be longer, the bitmap of the
    ids as little-endian uint32 words up to the word of the largest id. An identifier
    position on a 151k vocabulary holds ~50k ids: 200 KB as a list (~250 µs of BLAKE2b
    here, against a ~0.85 ms cold miss), 19 KB as a bitmap. ``kernels/core/src/fill.rs``
    (``ids_payload``) writes the same bytes."""
    n = int(ids.size)
    nw = (int(ids.max()) >> 5) + 1 if n else 0
    if n and nw < n:
        bits = np.zeros(nw * 32, dtype=bool)
        bits[ids] = True
        words = np.packbits(bits, bitorder="little")  # = the LE uint32 words' bytes
        return b"ids-bitmap/v1" + struct.pack("<II", n, nw) + words.tobytes()
    return b"ids-i32le/v1" + struct.pack("<I", n) + ids.astype("<i4", copy=False).tobytes()


@dataclass
class CacheStats:
    hits: int = 0
    misses: int = 0
    publishes: int = 0
    evictions: int = 0


class MaskCache:
    """Bounded, thread-safe, namespaced write-back cache of :class:`MaskEntry`.

    A namespace names the artifacts the entries were computed against (lexer automaton,
    token trie); publishing under a new namespace for the same slot rolls the old one over.
    """

    def __init__(self, max_bytes: int = 256 << 20) -> None:
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        # keyed by (namespace, *the key's fields): a tuple of ints, bytes and strings, which
        # the cyclic garbage collector stops tracking (one holding the MaskKey stays
        # tracked, and a full collection walked every key of a scoped grammar's cache)
        self._entries: OrderedDict[tuple[Any, ...], MaskEntry] = OrderedDict()
        self._bytes = 0
        self.stats = CacheStats()
        self.enabled = True
        self.generation = 0  # bumped by roll_over: memos built on entries check it
        # Bumped whenever an entry leaves (eviction, roll-over) or is replaced (_inject): a
        # memo that saw its entries resident at epoch e may skip the lookups while the
        # epoch is still e (the guide's warm fill path, guide.py _Warm).
        self.epoch = 0
        # Guides whose Rust filler keeps its own entry store (guide.py Guide.filler), least
        # recently charged first: their stores share this cache's max_bytes (charge_store).
        self._stores: OrderedDict[int, weakref.ref[Any]] = OrderedDict()
        self.store_drops = 0

    def charge_store(self, owner: Any) -> None:
        """Count ``owner``'s separate entry store against ``max_bytes`` after it grew.

        ``owner`` has ``store_nbytes()`` and ``drop_store()`` (a :class:`Guide` with a Rust
        filler). While this cache's entries plus every registered store exceed the bound,
        the least recently charged *other* stores are dropped whole (their entries are
        recomputed on demand, with the same ids: dropping is always exact). One store alone
        is bounded by ``max_bytes`` in Rust. Without this, a server with many role guides
        would hold ``max_bytes`` per guide.
        """
        with self._lock:
            k = id(owner)
            self._stores[k] = weakref.ref(owner)
            self._stores.move_to_end(k)
            live = []
            for kk, r in list(self._stores.items()):
                o = r()
                if o is None:
                    del self._stores[kk]
                else:
                    live.append(o)
            total = self._bytes + sum(o.store_nbytes() for o in live)
            for o in live[:-1]:
                if total <= self.max_bytes:
                    break
                total -= o.store_nbytes()
                o.drop_store()
                self.store_drops += 1

    @property
    def store_bytes(self) -> int:
        """Bytes of the registered guides' own stores (see :meth:`charge_store`)."""
        with self._lock:
            return sum(o.store_nbytes() for r in self._stores.values() if (o := r()) is not None)

    def get(self, namespace: str, key: MaskKey) -> MaskEntry | None:
        if not self.enabled:
            return None
        with self._lock:
            ck = _slot(namespace, key)
            e = self._entries.get(ck)
            if e is None:
                self.stats.misses += 1
                return None
            self._entries.move_to_end(ck)
            self.stats.hits += 1
        if e.key.kind != key.kind or e.key != key:
            raise MaskError(
                f"mask cache returned a {e.key.kind} entry for a {key.kind} key: "
                "identifier composition rule violated (Proposition 6)"
            )
        return e

    def publish(self, namespace: str, entry: MaskEntry) -> MaskEntry:
        """Insert idempotently; the resident entry wins. Divergent payloads raise."""
        if not self.enabled:
            return entry
        k = _slot(namespace, entry.key)
        with self._lock:
            old = self._entries.get(k)
            if old is not None:
                if old.entry_id != entry.entry_id:
                    raise MaskError(
                        f"two different masks published for one key (entry ids "
                        f"{old.entry_id} vs {entry.entry_id}): cache key unsound (OBL-KEY1)"
                    )
                return old
            self._entries[k] = entry
            self._bytes += entry.nbytes
            self.stats.publishes += 1
            while self._bytes > self.max_bytes and len(self._entries) > 1:
                _, ev = self._entries.popitem(last=False)
                self._bytes -= ev.nbytes
                self.stats.evictions += 1
                self.epoch += 1
        return entry

    def roll_over(self, keep_namespaces: set[str]) -> int:
        """Drop every entry outside ``keep_namespaces`` (a superseded grammar); count them."""
        with self._lock:
            drop = [k for k in self._entries if k[0] not in keep_namespaces]
            for k in drop:
                self._bytes -= self._entries.pop(k).nbytes
            self.generation += 1
            self.epoch += 1
        return len(drop)

    def _inject(self, namespace: str, key: MaskKey, entry: MaskEntry) -> None:
        """Test hook: store ``entry`` under ``key`` regardless of its own key."""
        with self._lock:
            self._entries[_slot(namespace, key)] = entry
            self.epoch += 1

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def nbytes(self) -> int:
        return self._bytes
