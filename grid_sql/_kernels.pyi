"""Contract of the compiled module ``grid_sql._kernels`` (built from ``kernels/py``).

Checked against the built module by ``python -m mypy.stubtest grid_sql._kernels``.
Byte semantics everywhere (``docs/design/foundation.md`` §1): patterns are regexes over
bytes (``unicode(false)``, ``utf8(false)``), inputs are ``bytes``.
"""

from collections.abc import Sequence
from typing import Final, final

__all__ = [
    "DEAD_STATE",
    "DEFAULT_MAX_STATES",
    "MaskFiller",
    "ParserKernel",
    "START_STATE",
    "ScanDfa",
    "TokenTrieArrays",
    "TrieWalker",
    "__version__",
    "build_lalr",
    "build_union_dfa",
    "copy_rows",
    "dfa_scan",
]

__version__: Final[str]
#: Default cap on union-DFA states in :func:`build_union_dfa` (``1 << 20``).
DEFAULT_MAX_STATES: Final[int]
#: State 0: every transition leads back to it; ``accept`` and ``live`` are empty.
DEAD_STATE: Final[int]
#: State 1: nothing read yet.
START_STATE: Final[int]

def build_union_dfa(
    patterns: Sequence[str], *, max_states: int = 1048576
) -> tuple[bytes, bytes, bytes, int, int]:
    """Build the union lexer DFA of ``patterns`` (terminal ``p`` is ``patterns[p]``).

    Returns ``(trans_u32_le, accept_u64_le, live_u64_le, n_states, n_words)``:

    - ``trans_u32_le``: ``n_states * 256`` little-endian ``u32``; the next state is
      ``trans[state * 256 + byte]``.
    - ``accept_u64_le`` / ``live_u64_le``: ``n_states * n_words`` little-endian ``u64``;
      bit ``p % 64`` of word ``state * n_words + p // 64`` is set iff pattern ``p`` fully
      matches exactly the bytes read (accept), resp. some extension of them (live).
    - ``n_words == ceil(len(patterns) / 64)``.

    The GIL is released during the build. Raises ``ValueError`` (message names the pattern
    index) for an invalid regex, a look-around assertion, a pattern that matches the empty
    string, an empty pattern list, or more than ``max_states`` states.
    """

def build_lalr(
    n_terminals: int,
    n_nonterminals: int,
    rules: Sequence[tuple[int, Sequence[int]]],
    start: int,
) -> tuple[bytes, bytes, int, int, int]:
    """LALR(1) tables (lark's construction, ``grid_sql/grammar/tables.py``).

    Symbols: terminals ``0..n_terminals``, ``$END`` = ``n_terminals``, nonterminal ``k`` =
    ``n_terminals + 1 + k``; ``rules`` are ``(lhs nonterminal index, rhs symbols)``.
    Returns ``(action_i32_le, goto_i32_le, n_states, start_state, end_state)``: ``action``
    is ``n_states * (n_terminals + 1)`` (``s + 1`` shift, ``-(r + 1)`` reduce, 0 error),
    ``goto`` is ``n_states * max(1, n_nonterminals)`` (-1 undefined); states are numbered
    breadth first from the start state, successors by ascending symbol id. The GIL is
    released. Raises ``ValueError`` on a conflict, on a ``reads`` cycle (lark's result
    would depend on iteration order) or on out-of-range symbols.
    """

def dfa_scan(trans: bytes, data: bytes, start: int) -> int:
    """Walk ``data`` through ``trans`` (layout as returned by :func:`build_union_dfa`)
    from state ``start`` and return the final state. Raises ``ValueError`` for a malformed
    table or an out-of-range state."""

@final
class ScanDfa:
    """The union-DFA side of a trie walk's scan tables, built once per lexer and shared by
    the :class:`TrieWalker` of every grammar over that lexer.

    Buffers are little-endian: ``trans`` u32 (``n_states * 256``), ``accept``/``live`` u64
    (``n_states * n_words``); ``candidates[s]`` are state ``s``'s accepting terminals in
    resolution order. Raises ``ValueError`` for inconsistent tables (the message names the
    input).
    """

    def __new__(
        cls,
        trans: bytes,
        accept: bytes,
        live: bytes,
        n_words: int,
        candidates: Sequence[Sequence[int]],
    ) -> ScanDfa: ...
    @property
    def n_states(self) -> int: ...
    @property
    def n_words(self) -> int: ...
    @property
    def nbytes(self) -> int:
        """Heap bytes of the tables."""

@final
class TokenTrieArrays:
    """The token trie (``grid_sql/mask/trie.py`` layout), built once per trie and shared by
    the :class:`TrieWalker` of every grammar over that vocabulary.

    Buffers are little-endian: ``edge`` u8, ``depth`` u16, ``size`` u32 (one per node),
    ``alias_offsets`` u32 (``n_nodes + 1``), ``alias_ids`` i32. Raises ``ValueError`` when
    they break the DFS preorder layout or the alias CSR.
    """

    def __new__(
        cls,
        edge: bytes,
        depth: bytes,
        size: bytes,
        alias_offsets: bytes,
        alias_ids: bytes,
    ) -> TokenTrieArrays: ...
    @property
    def n_nodes(self) -> int: ...
    @property
    def nbytes(self) -> int:
        """Heap bytes of the arrays."""

@final
class TrieWalker:
    """The cold trie walk of one (grammar runtime, token trie) pair (``grid_sql/mask/walk.py``
    ``Walker.walk_py`` is the reference; results are identical).

    References the shared ``dfa`` and ``trie`` (no copy); only ``ignored`` (u64 words,
    ``<= dfa.n_words``) and ``lexicons`` (``(terminal, words, fold_bare_case,
    fold_quoted_case, exclude, refused_prefixes)``; with ``exclude`` the words are the
    refused ones, and so is every lexeme beginning with a refused prefix) are its own.
    Raises ``ValueError`` for inconsistent inputs (the message names the input).
    """

    def __new__(
        cls,
        dfa: ScanDfa,
        ignored: bytes,
        lexicons: Sequence[tuple[int, Sequence[bytes], bool, bool, bool, Sequence[bytes]]],
        trie: TokenTrieArrays,
    ) -> TrieWalker: ...
    def walk(
        self,
        node0: int,
        dfa: int,
        rem: bytes,
        la_len: int,
        la_state: int,
        allowed: bytes,
    ) -> tuple[bytes, list[tuple[int, int, bytes]], int]:
        """CI walk strictly below trie node ``node0`` from the scan frame ``(dfa, rem,
        la_len, la_state)`` under the allowed-terminal bitset ``allowed`` (u64 words).

        Returns ``(ci_ids_i32_le, residue, nodes_visited)``: sorted CI ids, and the CD
        residue ``(node, terminal, requeue)`` in DFS order. Releases the GIL.
        """
    def walk_table(
        self,
        node0: int,
        dfa: int,
        rem: bytes,
        la_len: int,
        la_state: int,
        allowed: bytes,
        n_words: int,
    ) -> tuple[bytes, list[tuple[int, int, bytes]], int] | None:
        """:meth:`walk` answered from a freshly built class table over ``n_words``-word
        rows (what ``MaskFiller`` uses for cold walks from large subtrees): the same ids
        and residue; ``nodes_visited`` is the table walk's own count. None when no table
        applies (the last accept strictly inside ``rem``, or a lexicon-restricted terminal
        allowed, ignored or stop-marked). For parity tests; releases the GIL.
        """
    @property
    def n_nodes(self) -> int: ...
    @property
    def n_states(self) -> int: ...

@final
class ParserKernel:
    """The LALR(1) parser runtime of one grammar without scope rules
    (``grid_sql/parser/incremental.py`` ``ParserRuntime`` is the reference; stacks, hashes,
    allowed sets and verdicts are identical).

    Tables as :func:`build_lalr` returns them (``action``/``goto`` little-endian ``i32``),
    ``rule_lhs``/``rule_len`` per production; the scanner is the shared ``dfa`` plus the
    grammar's ``ignored`` set (u64 words) and ``lexicons`` (as :class:`TrieWalker`).
    Stacks are node ids of an interned arena (0 is the root, the start state); a scan
    state is ``(dfa, rem, la_len, la_state)``. Raises ``ValueError`` for inconsistent
    tables, an unknown node, or a shift the tables refuse.
    """

    def __new__(
        cls,
        n_terminals: int,
        n_nonterminals: int,
        action: bytes,
        goto: bytes,
        rule_lhs: Sequence[int],
        rule_len: Sequence[int],
        start_state: int,
        end_state: int,
        dfa: ScanDfa,
        ignored: bytes,
        lexicons: Sequence[tuple[int, Sequence[bytes], bool, bool, bool, Sequence[bytes]]],
    ) -> ParserKernel: ...
    @property
    def n_nodes(self) -> int:
        """Nodes in the arena (the root included)."""
    def push(self, parent: int, state: int, symbol: int) -> int:
        """The interned node ``state`` over ``parent``."""
    def states(self, node: int) -> list[int]:
        """LALR states from the bottom to ``node``."""
    def config_hash(self, node: int) -> int:
        """Rolling configuration hash of ``node`` (``StackNode.hash``)."""
    def allowed(self, node: int) -> bytes:
        """The allowed-terminal set of ``node`` as little-endian u64 words."""
    def shift(self, node: int, tid: int) -> int:
        """Apply ``tid``'s reduce chain and shift."""
    def advance(
        self, node: int, scan: tuple[int, bytes, int, int], data: bytes
    ) -> tuple[int, tuple[int, bytes, int, int]] | None:
        """Feed ``data`` from ``(node, scan)``: the new ``(node, scan)``, or None if the
        result is not a viable prefix."""
    def eos_allowed(self, node: int, scan: tuple[int, bytes, int, int]) -> bool:
        """EOS gate: the input so far is a complete sentence."""

@final
class MaskFiller:
    """The whole mask fill of one (grammar without scope rules, vocabulary): root entry,
    CD residue resolution, sub-walks and the row in one GIL-released call
    (``grid_sql/mask/guide.py`` ``Guide._fill`` is the reference; rows, counts and entry
    ids are identical).

    Built from a :class:`ParserKernel` and a :class:`TrieWalker` of the same grammar;
    ``lexicon_mask`` (u64 words) marks the lexicon terminals (identifier-position keys),
    ``schema_fp`` is the schema lexicon's fingerprint (None without a lexicon). Entries
    live in the filler's own store, dropped wholesale past ``max_bytes``.
    """

    def __new__(
        cls,
        parser: ParserKernel,
        walker: TrieWalker,
        lexicon_mask: bytes,
        schema_fp: bytes | None,
        term_words: int,
        vocab_size: int,
        eos_id: int,
        max_bytes: int,
    ) -> MaskFiller: ...
    def fill(
        self,
        stack: Sequence[tuple[int, int]],
        scan: tuple[int, bytes, int, int],
        out: object,
        walk: bool,
    ) -> tuple[int, list[str]] | None:
        """Fill ``out`` (writable C-contiguous int32, at least ``ceil(vocab_size / 32)``
        items; the rest zeroed) with the mask of the configuration ``(stack, scan)``
        (``stack``: ``(state, symbol)`` pairs bottom-up above the root). Returns
        ``(allowed count, entry ids)``, or None when ``walk`` is false and an entry is not
        stored (``out`` untouched). Raises ``ValueError`` for bad input or an empty mask."""
    def reset(self) -> None:
        """Drop the stored entries and every memo (the next fills walk again)."""
    def set_memo_limit(self, n: int) -> None:
        """Keep at most ``n`` class records / memoized sub-walks before dropping those
        memos (checked between fills; the store is kept). Default ``1 << 18``."""
    @property
    def walks(self) -> int:
        """Trie walks run (store misses) so far."""
    @property
    def table_stats(self) -> tuple[int, int, int]:
        """Class tables (scan-signature classes of cold walks from large subtrees):
        ``(built, walks answered from one, bytes held)``."""
    @property
    def n_entries(self) -> int: ...
    @property
    def store_bytes(self) -> int: ...
    @property
    def resets(self) -> int:
        """Times the store was dropped for size."""

def copy_rows(sources: Sequence[object], out: object, rows: Sequence[int]) -> None:
    """Copy finished mask rows into one step's bitmask in one GIL-released call: row
    ``rows[k]`` of ``out`` (a writable C-contiguous 2-d int32 buffer) becomes
    ``sources[k]`` (a C-contiguous int32 buffer no wider than a row) followed by zeros.
    Everything is checked before a word is written; a source overlapping ``out`` is
    refused. Raises ``ValueError`` for bad input."""
