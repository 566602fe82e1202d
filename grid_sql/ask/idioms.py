"""Foreign idioms in blocked intent (issue #30 §2): the model wanted another dialect's construct.

A model trained mostly on T-SQL or MySQL reaches for ``TOP 5``, ``ISNULL(``, ``GETDATE()``,
``LEN(`` or backtick quoting where the target dialect has none of them. The mask makes them
unwritable, and the model then writes *something* allowed: ``SELECT T1.InvoiceDate -
GETDATEASINT...`` (the function name glued into an alias), an answer that runs and means
nothing. The decode loop records every step whose favourite token was blocked
(:class:`~grid_sql.decode.loop.BlockedIntent`); this module reads those favourites for
constructs of another dialect, and the Asker then spends its repair round on a one-line hint
("SQLite has no TOP; use LIMIT n at the end") instead of returning the nonsense.

What counts as foreign is *derived* from the target, never a fixed deny-list that could flag
a construct the dialect has:

* a keyword (``TOP``, ``ILIKE``) is foreign when the target grammar has no terminal for it;
* a function name followed by ``(`` is foreign when the role grammar's ``FUNCTION_NAME``
  lexicon (the dialect's curated allow-list, ``grid_sql/policy/functions.py``, narrowed by
  the policy) does not hold it, and some dialect's parser knows it as a function (sqlglot's
  T-SQL, Oracle, MySQL, PostgreSQL and SQLite function tables, and our allow-lists), so
  ``ISNULL(`` is foreign on PostgreSQL and SQLite but not on MySQL, which has it;
* backtick or ``[bracket]`` quoting is foreign when the target grammar's ``IDENT`` does not
  lex it (SQLite accepts both, PostgreSQL neither, MySQL only backticks).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass

from ..decode.loop import BlockedIntent
from ..dialect import Dialect
from ..grammar import Grammar
from ..mask.vocab import Vocabulary
from ..policy.conformance import function_instead
from ..policy.functions import NEVER_ALLOWED, dialect_function_names
from ..schema.model import SchemaSnapshot

__all__ = ["ForeignIdiom", "catalog_names", "foreign_idioms", "idiom_flags", "idiom_hints"]

MIN_PROB = 0.2  # a favourite the model was unsure of is no evidence (as for denied names)

_IDENT_TAIL = re.compile(r"[A-Za-z_][A-Za-z0-9_]*$")
_IDENT_HEAD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

# Keywords of other dialects with what to write instead; each is foreign only where the
# target grammar has no terminal of that name.
_KEYWORDS: dict[str, str] = {
    "TOP": "use LIMIT n at the end of the statement",
    "ILIKE": "use LOWER(x) LIKE LOWER('pattern')",
}

_QUOTES = {
    "`": ("`x`", "backtick quoting"),
    "[": ("[x]", "[bracket] quoting"),
}


@dataclass(frozen=True)
class ForeignIdiom:
    """A blocked favourite that spells another dialect's construct: ``idiom`` (``TOP``,
    ``ISNULL(``, ``` ` ```, ``[``), the one-line ``hint`` for the repair round, ``step`` and
    ``prob`` from the :class:`BlockedIntent`."""

    step: int
    idiom: str
    hint: str
    prob: float


@functools.cache
def _known_functions() -> frozenset[str]:
    """Every name some supported or commonly borrowed dialect calls a function (lower case):
    what a model may *want* to call. Whether it is foreign is the target's question."""
    import sqlglot

    ours = [Dialect.get(name) for name in Dialect.names()]
    out = {f for d in ours for f in d.functions}
    for name in ("tsql", "oracle", *(d.sqlglot for d in ours)):
        out.update(n.lower() for n in sqlglot.Dialect.get_or_raise(name).parser_class.FUNCTIONS)
    return frozenset(n for n in out if _IDENT_HEAD.fullmatch(n)) - NEVER_ALLOWED


def _allowed_functions(grammar: Grammar, dialect: str) -> frozenset[str]:
    """The function names the role grammar can write (its ``FUNCTION_NAME`` and
    ``NILADIC_NAME`` lexicons), else the dialect's allow-list."""
    lex = grammar.lexicon
    if lex is not None and "FUNCTION_NAME" in lex.categories:
        words = [
            w
            for cat in ("FUNCTION_NAME", "NILADIC_NAME")
            if cat in lex.categories
            for w in lex.categories[cat].words
        ]
        return frozenset(w.decode("utf-8", "replace").strip('"`[]').lower() for w in words)
    return dialect_function_names(dialect)


def _lexes_ident(grammar: Grammar, text: str) -> bool:
    for t in grammar.terminals:
        if t.name == "IDENT":
            return re.fullmatch(t.pattern, text) is not None
    return False


def _hint(dialect: str, what: str, instead: str | None) -> str:
    found = Dialect.find(dialect)
    label = dialect if found is None else found.label
    if instead:
        return f"{label} has no {what}; {instead}."
    return f"{label} has no {what}; write it with what {label} has."


def foreign_idioms(
    token_ids: Sequence[int],
    blocked: Sequence[BlockedIntent],
    vocab: Vocabulary,
    grammar: Grammar,
    dialect: str,
    names: frozenset[str] = frozenset(),
) -> list[ForeignIdiom]:
    """The blocked favourites of one generation that spell a construct ``dialect`` lacks.

    ``names``: lower-cased table and column names of the catalog; a word that is (a prefix
    of) one of them is a name, not an idiom. One entry per idiom (its first step)."""
    if not blocked:
        return []
    terminals = {t.name for t in grammar.terminals}
    functions = _allowed_functions(grammar, dialect)
    known = _known_functions()
    out: dict[str, ForeignIdiom] = {}

    def add(b: BlockedIntent, idiom: str, hint: str) -> None:
        if idiom not in out:
            out[idiom] = ForeignIdiom(b.step, idiom, hint, b.prob)

    for b in blocked:
        if b.prob < MIN_PROB:
            continue
        prefix = vocab.spell(list(token_ids[: b.step])).decode("utf-8", "replace")
        tok = vocab.token_bytes[b.token].decode("utf-8", "replace")
        tail_m = _IDENT_TAIL.search(prefix)
        tail = tail_m.group(0) if tail_m is not None else ""
        head_m = _IDENT_HEAD.match(tok)
        stripped = tok.lstrip(" \t\n")
        # 1. a call: the word under way (or the favourite's own word) followed by `(`
        call = ""
        if tok.startswith("(") and tail:
            call = tail
        else:
            m = re.match(r"[ \t\n]*([A-Za-z_][A-Za-z0-9_]*)\(", tok)
            if m is not None:
                call = (tail if head_m is not None else "") + m.group(1)
        if call:
            low = call.lower()
            if low in known and low not in functions and low not in NEVER_ALLOWED:
                instead = _instead(low, dialect) or function_instead(low, dialect)
                add(
                    b,
                    f"{call.upper()}(",
                    _hint(dialect, f"{call.upper()}()", f"use {instead}" if instead else None),
                )
            continue
        # 2. a keyword of another dialect, as the favourite writes it whole
        word = (tail + head_m.group(0)) if head_m is not None else ""
        if not word and stripped != tok:
            m2 = _IDENT_HEAD.match(stripped)
            word = m2.group(0) if m2 is not None else ""
        kw = _keyword(word.upper(), terminals)
        if kw and not _is_name(word, names):
            add(b, kw, _hint(dialect, kw, _KEYWORDS[kw]))
            continue
        # 3. identifier quoting the target does not lex
        q = stripped[:1]
        if q in _QUOTES and (stripped != tok or not prefix or prefix[-1] in " \t\n,(."):
            rest = stripped[1:2]
            sample, what = _QUOTES[q]
            if (not rest or rest.isalpha() or rest == "_") and not _lexes_ident(grammar, sample):
                add(b, q, _hint(dialect, what, _quote_instead(grammar, dialect)))
    return sorted(out.values(), key=lambda f: f.step)


def catalog_names(snapshot: SchemaSnapshot) -> frozenset[str]:
    """Lower-cased table and column names of ``snapshot`` (denied ones included)."""
    out: set[str] = set()
    for _, t in snapshot.iter_tables():
        out.add(t.name.lower())
        out.update(c.lower() for c in t.column_names)
    return frozenset(out)


def _keyword(up: str, terminals: set[str]) -> str:
    """The foreign keyword ``up`` spells: the keyword itself, or a prefix of one (`` IL``
    of ``ILIKE``: tokenizers split it) that starts no keyword of the target grammar."""
    for kw in _KEYWORDS:
        if kw in terminals or len(up) < 2 or not kw.startswith(up):
            continue
        if up == kw or not any(t.startswith(up) for t in terminals):
            return kw
    return ""


def _is_name(word: str, names: frozenset[str]) -> bool:
    key = word.lower()
    return any(n.startswith(key) for n in names)


def _instead(function: str, dialect: str) -> str | None:
    """The dialect's own spelling of another dialect's function (its prompt rules)."""
    found = Dialect.find(dialect)
    return None if found is None else found.foreign_function_hints.get(function)


def _quote_instead(grammar: Grammar, dialect: str) -> str:
    """How the target quotes identifiers, read off its ``IDENT`` terminal."""
    if _lexes_ident(grammar, '"x"'):
        return 'quote names with double quotes ("Name") or not at all'
    if _lexes_ident(grammar, "`x`"):
        return "quote names with backticks (`Name`) or not at all"
    return "write names unquoted"


def idiom_flags(found: Sequence[ForeignIdiom]) -> tuple[str, ...]:
    """Seal flags of the idioms found: ``foreign-idiom:TOP``, ``foreign-idiom:ISNULL``."""
    return tuple(dict.fromkeys(f"foreign-idiom:{f.idiom.rstrip('(')}" for f in found))


def idiom_hints(found: Sequence[ForeignIdiom]) -> list[str]:
    """The repair round's one-line hints, one per idiom."""
    return list(dict.fromkeys(f.hint for f in found))
