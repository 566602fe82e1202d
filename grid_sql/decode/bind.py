"""Binding on close: the decode-side half of the select-list obligations (``docs/scope.md``).

With ``ScopeTable(bind_select_list=True)`` the exact mask keeps a FROM clause open while a
column the select list names (``T2.name``, or a bare ``name`` no FROM table has) is bound by
no FROM item. The mask says what may *not* follow; it cannot make a small model write the
join it forgot. Measured (bench/RESULTS-spider.md §8), greedy decoding then glues the
blocked keyword into an alias (``FROM countrylanguage ORDERBYPercentageDESC``): ``ORDER`` is
still the exact prefix of a longer alias, so the mask must admit it.

:class:`BindOnClose` acts at exactly that point. When the model's own first choice (its
unmasked argmax) would close the FROM clause — EOS, ``;``, ``)`` or a word spelling a
blocked keyword such as ``ORDER`` — it writes the missing FROM item instead:
``JOIN country AS T2 ON T2.Code = T1.CountryCode`` when a foreign key links the table to
one already in FROM, else ``JOIN country AS T2 ON`` and the model writes the condition.

Why this is safe to add on top of an exact mask: every written token is checked against
the exact mask of its own configuration (the loop raises otherwise) and recorded with kind
``bind``, so the audit trail replays bit-identically and an auditor sees which tokens the
policy wrote. It changes only *which* admitted tokens are chosen, never what is admitted,
and it fires only where the grammar has already refused the close.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from ..errors import OptionError
from ..grammar.scope import Item, Ref, norm_name
from ..mask.guide import Guide
from ..mask.vocab import greedy_token_ids
from ..parser.incremental import Configuration, ParserRuntime, StackNode
from ..schema.model import SchemaSnapshot

__all__ = ["BindOnClose", "JoinLink", "snapshot_links"]

_WORD = re.compile(rb"\s*([A-Za-z_]+)\Z")
_CLOSE_PUNCT = re.compile(rb"\s*[;)]")


@dataclass(frozen=True, slots=True)
class JoinLink:
    """A foreign key ``table(columns) -> referred_table(referred_columns)``, names spelled as
    the catalog spells them (the front builds these from the SchemaSnapshot). ``schema``:
    the table's schema; ``referred_schema``: the referred table's (None: the same). Only
    read on a catalog of several schemas, where ``academic.author`` and ``scholar.author``
    are different tables with different keys."""

    table: str
    columns: tuple[str, ...]
    referred_table: str
    referred_columns: tuple[str, ...]
    schema: str | None = None
    referred_schema: str | None = None


def snapshot_links(snapshot: SchemaSnapshot) -> list[JoinLink]:
    """Every foreign key of ``snapshot`` as a :class:`JoinLink`, schemas included."""
    return [
        JoinLink(
            t.name,
            fk.columns,
            fk.referred_table,
            fk.referred_columns,
            sch.name,
            fk.referred_schema,
        )
        for sch in snapshot.schemas
        for t in sch.tables
        for fk in t.foreign_keys
    ]


# a table as the binder keys it: (schema, table), normalized; the schema is "" on a
# catalog of one schema (``ScopeTable.table_schemas`` off)
_Key = tuple[str, str]
_Edge = tuple[tuple[str, ...], _Key, tuple[str, ...]]


class BindOnClose:
    """Writes the FROM item a select-list obligation is waiting for, when the model tries to
    close the FROM clause without it (module docstring). One per guide; stateless per call.

    ``links``: the schema's foreign keys (join conditions are written only along them);
    ``max_binds``: at most this many items per generation (the loop counts).
    """

    def __init__(self, guide: Guide, links: Iterable[JoinLink] = (), max_binds: int = 4) -> None:
        rt = guide.runtime
        if rt.sem is None or not rt.sem.bind:
            raise OptionError("BindOnClose needs a grammar with select-list obligations on")
        self.guide = guide
        self.rt = rt
        self.sem = rt.sem
        self.max_binds = max_binds
        g = guide.grammar
        self._keywords = {t.id: t.name.lower() for t in g.terminals if t.is_string}
        # the keywords that can close a FROM clause at all: a word related to none of them
        # never triggers, so most tokens are turned away without touching the parser
        self._closer_words = [k for t, k in self._keywords.items() if (rt.closers_mask >> t) & 1]
        self._cap = min(64, max(len(b) for b in guide.vocab.token_bytes))
        self._tables = _spellings(rt, g.terminal_ids.get("TABLE_NAME"))
        self._schemas = _spellings(rt, g.terminal_ids.get("SCHEMA_NAME"))
        # the columns of every table by (schema, table): on a catalog of several schemas a
        # FROM item is written where its schema has it (``JOIN atis.airline``, not the
        # bare name the default schema lacks and the mask refuses) and a candidate is
        # judged by its own schema's columns, not the union over namesakes
        tab = self.sem.table
        self._default = tab.default_schema or ""
        self._cols: dict[_Key, frozenset[str]] = (
            dict(tab.schema_columns)
            if tab.schema_columns is not None
            else {("", t): cs for t, cs in tab.columns.items()}
        )
        # undirected foreign-key edges: table -> [(its columns, other table, other columns)]
        self._links: dict[_Key, list[_Edge]] = {}
        for k in links:
            a = self._key(k.schema, k.table)
            b = self._key(k.referred_schema or k.schema, k.referred_table)
            self._links.setdefault(a, []).append((k.columns, b, k.referred_columns))
            self._links.setdefault(b, []).append((k.referred_columns, a, k.columns))
        self._shape: dict[int, str | None] = {}
        self._rank: dict[_Key, int] = {}

    def ranked(self, order: Iterable[tuple[str | None, str]]) -> BindOnClose:
        """This policy with candidates of equal standing taken in ``order`` ((schema,
        table), most relevant first; those it leaves out after, then by name) instead of by
        name: on a catalog the prompt cannot show whole, the schema linker's order for the
        question (``LocalGeneration``), so a distractor that happens to carry the column
        and sort first (``audit_opportunity_old`` before ``review`` for ``rating``) is not
        what gets written. A shallow copy: the per-catalog tables are shared, the order is
        the copy's own (one per generation)."""
        out = copy.copy(self)
        out._rank = {}
        for i, (schema, table) in enumerate(order):
            out._rank.setdefault(self._key(schema, table), i)
        return out

    # ------------------------------------------------------------------ the trigger
    def _closing_shape(self, token: int) -> str | None:
        """What ``token`` looks like: ``"close"`` (EOS, ``;``, ``)``), a lower-cased word
        (letters only, leading whitespace allowed) that :meth:`_spells_blocked` could accept
        for some closing keyword, or None. Memoized per id: the per-step check of an
        ordinary token is one dictionary lookup."""
        s = self._shape.get(token, "")
        if s != "":
            return s
        out: str | None = None
        if token == self.guide.eos_id:
            out = "close"
        else:
            b = self.guide.vocab.token_bytes[token]
            if _CLOSE_PUNCT.match(b):
                out = "close"
            else:
                w = _WORD.match(b)
                if w is not None and _related(w.group(1).decode().lower(), self._closer_words):
                    out = w.group(1).decode().lower()
        self._shape[token] = out
        return out

    def span(self, cfg: Configuration, output: Callable[[], bytes], top: int) -> bytes | None:
        """The bytes to write at ``cfg`` when the model's first choice is ``top``; None when
        the policy does not fire. ``output()`` spells the output so far (called only then)."""
        shape = self._closing_shape(top)
        if shape is None:
            return None
        rt = self.rt
        if not rt.pending_refs(cfg.stack):
            return None
        node = rt.finalize(cfg)
        if node is None:
            return None
        blocked = rt.blocked_closers(node)
        if not blocked:
            return None
        text = output()
        if shape != "close":
            b = self.guide.vocab.token_bytes[top]
            starts_word = b[:1].isspace() or not text or not _ident_byte(text[-1])
            if not starts_word or not self._spells_blocked(shape, node, blocked):
                return None
        ctx = rt.closed_context(node, blocked[0])
        refs = self.sem.unbound_refs(ctx) if ctx is not None else ()
        if ctx is None or not refs:
            return None
        lead = b"" if text[-1:].isspace() else b" "
        for piece in self._pieces(ctx.levels[-1].items, text, refs):
            data = lead + piece
            if rt.advance(cfg, data) is not None:
                return data
        return None

    def _spells_blocked(self, word: str, node: StackNode, blocked: tuple[int, ...]) -> bool:
        """``word`` is a keyword the obligation blocks, a prefix of it two letters or
        longer, or the keyword glued to more letters; and not the start of a keyword the
        grammar admits here (``IN`` of ``INNER``, ``L`` of ``LEFT``)."""
        if not _related(word, [self._keywords[t] for t in blocked if t in self._keywords]):
            return False
        m = self.rt.allowed_mask(node)
        for t, k in self._keywords.items():
            if (m >> t) & 1 and k.startswith(word):
                return False
        return True

    # ------------------------------------------------------------------ what to write
    def _key(self, schema: str | None, table: str) -> _Key:
        """How the binder keys a table: its schema (the default for none) on a catalog of
        several schemas, else ""."""
        if self.sem.table.schema_columns is None:
            return ("", norm_name(table))
        return (norm_name(schema) if schema else self._default, norm_name(table))

    def _item_key(self, item: Item) -> _Key | None:
        return None if item.table is None else self._key(item.schema, item.table)

    def _pieces(self, items: tuple[Item, ...], text: bytes, refs: tuple[Ref, ...]) -> list[bytes]:
        """Candidate FROM items for the first unbound reference's qualifier (or bare
        column), best first: a table not yet in FROM (``items``), one that has the columns
        read through the reference, one with a foreign key to a FROM item (which gives the
        condition), one of a schema FROM already reads, then in :meth:`ranked` order, then
        by name."""
        cols = self._cols
        ref = refs[0]
        in_from = {k for k in map(self._item_key, items) if k is not None}
        from_schemas = {s for s, _ in in_from}
        alias: bytes | None = None
        need: set[str]
        if ref.qualifier is not None:
            need = {r.column for r in refs if r.qualifier == ref.qualifier and r.column != "*"}
            named = [k for k in cols if k[1] == ref.qualifier]
            cands = named or [k for k, cs in cols.items() if need <= cs]
            # as written in the output (stack values are interned: ``Ref.spelled`` may be
            # another output's spelling of the same name)
            written = _written(text, ref.qualifier)
            # ``country.Name``: join ``country`` itself, without an alias
            if not (named and norm_name(written) == ref.qualifier):
                alias = written
        else:
            cands = [k for k, cs in cols.items() if ref.column in cs]
            need = {ref.column}
        # a namesake of another schema may lack the columns (``journal.name`` is
        # ``academic.journal``'s, not ``scholar.journal``'s): those that have them first
        cands.sort(
            key=lambda k: (
                k in in_from,
                not need <= cols[k],
                not self._linked(k, in_from),
                k[0] not in from_schemas,
                self._rank.get(k, len(self._rank)),
                k,
            )
        )
        out: list[bytes] = []
        for k in cands[:8]:
            word = self._written_table(k)
            if word is None:
                continue
            head = b"JOIN " + word + (b" AS " + alias if alias is not None else b"")
            me = alias if alias is not None else self._tables[k[1]]
            for cond in self._conditions(k, me, items, text):
                out.append(head + b" ON " + cond)
            out.append(head + b" ON")
        return out

    def _written_table(self, key: _Key) -> bytes | None:
        """The table as a FROM item spells it: bare in the default schema (or with no
        schemas), else ``schema.table``; None when the lexicons cannot spell it."""
        schema, table = key
        word = self._tables.get(table)
        if word is None or schema in ("", self._default):
            return word
        qual = self._schemas.get(schema)
        return None if qual is None else qual + b"." + word

    def _linked(self, key: _Key, in_from: set[_Key]) -> bool:
        return any(o in in_from for _, o, _ in self._links.get(key, ()))

    def _conditions(
        self, key: _Key, me: bytes, items: tuple[Item, ...], text: bytes
    ) -> list[bytes]:
        """``me.a = n.b`` along each foreign key between ``key`` and a FROM item ``n``."""
        out: list[bytes] = []
        for mine, other, theirs in self._links.get(key, ()):
            for i in items:
                if self._item_key(i) != other or not i.names or len(mine) != len(theirs):
                    continue
                name = _written(text, i.names[0])
                parts = [
                    me + b"." + a.encode() + b" = " + name + b"." + c.encode()
                    for a, c in zip(mine, theirs, strict=True)
                ]
                out.append(b" AND ".join(parts))
        return out

    def tokens(self, data: bytes) -> list[int]:
        """``data`` spelled as token ids (longest match; the loop checks every id against
        the exact mask of its configuration)."""
        return greedy_token_ids(self.guide.vocab, data, max_len=self._cap)


def _spellings(rt: ParserRuntime, tid: int | None) -> dict[str, bytes]:
    """Normalized name -> the shortest spelling of it a lexicon category admits (the
    catalog's own, where a quoted form is also listed)."""
    words = rt.lexicon.get(tid) if tid is not None else None
    out: dict[str, bytes] = {}
    for w in sorted(words.words, key=lambda w: (len(w), w)) if words is not None else ():
        out.setdefault(norm_name(w), w)
    return out


def _related(word: str, keywords: list[str]) -> bool:
    """``word`` is one of ``keywords``, a prefix of one two letters or longer (one letter is
    an alias as often as a keyword's start: ``JOIN Highschooler H``), or one glued to more."""
    return any((len(word) > 1 and k.startswith(word)) or word.startswith(k) for k in keywords)


def _ident_byte(b: int) -> bool:
    return chr(b).isalnum() or b in b'_$"`]'


def _written(text: bytes, name: str) -> bytes:
    """How the output spelled the FROM name ``name`` (normalized): its last whole-word
    occurrence, so a case-sensitive alias (MySQL) is written back as the model wrote it."""
    pat = re.compile(rb"(?<![\w`\"])" + re.escape(name.encode()) + rb"(?![\w`\"])", re.I)
    found = pat.findall(text)
    return found[-1] if found else name.encode()
