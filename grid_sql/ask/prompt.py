"""The prompt: the role's view of the schema, the question, optional few-shot examples.

Why only what the role may see: the prompt should describe the same language the guide
enforces. Showing a denied table or column invites the model to spend its budget on a
statement the grammar (or the checker) will refuse, and leaks the schema to whoever reads
prompts. So the schema text is built from the :class:`SchemaSnapshot` filtered through the
effective :class:`Policy`: tables with some right, and within them only the columns the role
may read or write, with types, primary and foreign keys (keys only when both ends are visible).

No sample rows or values by default: row values are data, and data written by third parties
is a prompt-injection channel. Callers who want them pass ``samples`` (rows) or ``values``
(a few distinct values per short text column, :mod:`grid_sql.ask.values`) explicitly.

Large schemas: tables are ranked by lexical overlap between the question and the table and
column names, plus a bonus for foreign-key neighbours of the best matches, and the top ones
are described in full; the rest are listed by name only. Above 64 visible tables the ranking
is :mod:`grid_sql.schema.linking`'s (names, catalog comments, foreign keys, idf weights), and
with a token budget (the Asker always passes one, derived from the model's context window:
:mod:`grid_sql.ask.budget`) the schema shrinks until the prompt fits: fewer tables in full,
narrowed columns, names only, a count of the rest. The guide is unaffected: its lexicon still
admits every allowed table, so a model that needs an unlisted table can still name it.

Catalog comments (PostgreSQL ``COMMENT ON``, MariaDB ``COMMENT``) are shown: a column's as
``/* ... */`` after it, a table's as ``-- ...`` after its statement (at most 200 characters;
they are the schema owner's words, not row data).

The rule "repeat the expression, never an alias, in GROUP BY / HAVING" is there because the
schema lexicon admits only real column names (a bare ORDER BY item is the one place the
grammar admits an output alias): an output alias cannot be named
again later in the statement, so a model that tries gets steered into a dead branch.

Messages are plain ``{"role", "content"}`` dicts; the backend applies the model's own chat
template to them.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..dialect import Dialect
from ..policy.model import Policy
from ..schema.model import SchemaSnapshot
from .tables import (  # noqa: F401 - re-exported: the prompt's public names
    VisibleTable,
    _comment,
    _fk_visible,
    _q,
    _stem,
    describe_table,
    rank_tables,
    visible_tables,
    words,
)
from .values import ColumnValues

if TYPE_CHECKING:  # pragma: no cover - typing only
    from .budget import PromptBudget

DIALECT_NAMES = {name: Dialect.get(name).label for name in Dialect.names()}
DEFAULT_MAX_TABLES = 16
DEFAULT_MAX_CHARS = 6000

Message = dict[str, str]


@dataclass(frozen=True)
class Example:
    """One few-shot pair: a question and the SQL that answers it."""

    question: str
    sql: str


def schema_text(
    question: str,
    snapshot: SchemaSnapshot,
    policy: Policy,
    *,
    max_tables: int = DEFAULT_MAX_TABLES,
    max_chars: int = DEFAULT_MAX_CHARS,
    values: Mapping[tuple[str, str], Mapping[str, ColumnValues]] | None = None,
    room: int | None = None,
    count: Callable[[str], int] | None = None,
) -> str:
    """The role's schema for the prompt: the most relevant tables in full, the rest by name;
    ``values``: example values per (schema, table) and column (``grid_sql.ask.values``);
    ``room``: at most this many tokens as ``count`` counts them (``grid_sql.ask.budget``;
    negative: no schema at all)."""
    from .budget import byte_count, render_schema

    if room is not None and room < 0:
        return ""
    return render_schema(
        question,
        snapshot,
        policy,
        max_tables=max_tables,
        max_chars=max_chars,
        values=values,
        room=room,
        count=count or byte_count,
    )


def _system(snapshot: SchemaSnapshot, policy: Policy) -> str:
    """The rules. Why the quoting rule: a double-quoted word is an identifier in every
    role grammar (SQLite's fallback of an unknown ``"x"`` to a string is not modelled: under a
    schema lexicon it would let a forbidden column through as a "string"), so a model that
    copies ``"AD"`` from a question is kept from ending the statement there and escapes into
    ``"AD" . x`` (bench/RESULTS-spider.md §9c)."""
    dialect = DIALECT_NAMES.get(snapshot.dialect, snapshot.dialect)
    verbs = sorted(v.upper() for v in policy.statement_verbs)
    allowed = "only SELECT queries" if policy.read_only else "these statements: " + ", ".join(verbs)
    return (
        f"You are an expert {dialect} developer. Answer the user's question about the database "
        f"with exactly one {dialect} SQL statement and nothing else. Use only the tables and "
        f"columns described in the schema. You may write {allowed}. ORDER BY may name an "
        f"output column alias; in WHERE, GROUP BY and HAVING repeat the expression itself "
        f"(e.g. HAVING SUM(x) > 10). Write text values in single quotes ('Paris'); double "
        f"quotes may only enclose a column or table name."
    )


def build_messages(
    question: str,
    snapshot: SchemaSnapshot,
    policy: Policy,
    *,
    examples: Sequence[Example] = (),
    samples: Mapping[str, Sequence[Sequence[object]]] | None = None,
    max_tables: int = DEFAULT_MAX_TABLES,
    max_chars: int = DEFAULT_MAX_CHARS,
    values: Mapping[tuple[str, str], Mapping[str, ColumnValues]] | None = None,
    budget: PromptBudget | None = None,
    date_help: bool = False,
) -> list[Message]:
    """Chat messages: system rules with the schema, few-shot pairs, then the question.

    ``samples`` (table name → rows) is opt-in and appended as SQL comments under the schema;
    ``values`` (opt-in) puts example values of columns into their CREATE TABLE lines;
    ``budget``: the whole prompt fits ``budget.first`` tokens (the schema shrinks to fit);
    ``date_help``: a question about dates gets the dialect's date and cast line under the
    rules (:mod:`grid_sql.ask.datehelp`).
    """
    from .datehelp import date_line

    rules = date_line(question, snapshot, policy) if date_help else None

    def build(room: int | None) -> list[Message]:
        schema = schema_text(
            question,
            snapshot,
            policy,
            max_tables=max_tables,
            max_chars=max_chars,
            values=values,
            room=room,
            count=budget.count_text if budget is not None else None,
        )
        return _assemble(question, schema, snapshot, policy, examples, samples, rules)

    if budget is None:
        return build(None)
    from .budget import fit_messages

    return fit_messages(build, budget)


def _assemble(
    question: str,
    schema: str,
    snapshot: SchemaSnapshot,
    policy: Policy,
    examples: Sequence[Example],
    samples: Mapping[str, Sequence[Sequence[object]]] | None,
    rules: str | None = None,
) -> list[Message]:
    if samples:
        extra = []
        for table, rows in samples.items():
            extra.append(f"-- sample rows of {table}:")
            extra.extend(f"--   {tuple(r)!r}" for r in rows)
        schema += "\n\n" + "\n".join(extra)
    head = _system(snapshot, policy) if rules is None else f"{_system(snapshot, policy)} {rules}"
    system = f"{head}\n\nDatabase schema:\n{schema}"
    msgs: list[Message] = [{"role": "system", "content": system}]
    for ex in examples:
        msgs.append({"role": "user", "content": _user(ex.question)})
        msgs.append({"role": "assistant", "content": ex.sql})
    msgs.append({"role": "user", "content": _user(question)})
    return msgs


def _user(question: str) -> str:
    return f"Question: {question.strip()}"


def alias_hints(sql: str, snapshot: SchemaSnapshot) -> list[str]:
    """Repair hints for output aliases named again later in the statement.

    The schema lexicon admits real column names only, so ``HAVING total > 1`` after
    ``SUM(x) AS total`` cannot be written (a bare ``ORDER BY total`` can); the mask then
    pushes the model into another reading of the name (a qualifier, a function) and the
    checker's message about *that* reading does not tell the model what went wrong; this
    says it plainly. Only SELECT-list aliases count (``FROM t AS T1`` is a table alias, which
    may and must be named again).
    """
    import sqlglot
    from sqlglot import exp

    from ..policy.sqlparse import parse_one as guarded_parse_one

    found = Dialect.find(snapshot.dialect)
    read = snapshot.dialect if found is None else found.sqlglot
    try:
        tree = guarded_parse_one(sql, read)
    except (sqlglot.errors.ParseError, sqlglot.errors.TokenError):
        return []
    columns = {c.name.lower() for _, t in snapshot.iter_tables() for c in t.columns}
    hints = []
    for select in tree.find_all(exp.Select):
        aliases = {
            e.alias.lower(): e.alias
            for e in select.expressions
            if isinstance(e, exp.Alias) and e.alias.lower() not in columns
        }
        if not aliases:
            continue
        used: set[str] = set()
        for key in ("where", "group", "having"):
            part = select.args.get(key)
            if part is None:
                continue
            for col in part.find_all(exp.Column):
                if not col.table and col.name.lower() in aliases:
                    used.add(col.name.lower())
        for low in sorted(used):
            alias = aliases[low]
            hints.append(
                f"The output alias {alias} cannot be referred to later in the statement; "
                f"repeat its expression instead (e.g. HAVING SUM(...) > 10); only ORDER BY "
                f"may name it."
            )
    return hints


_BACKTICKED = re.compile(r"`([^`]+)`")


def repair_tables(
    sql: str, texts: Sequence[str], snapshot: SchemaSnapshot, policy: Policy
) -> list[VisibleTable]:
    """The tables a repair needs to see: those the refused statement names and those the
    violation messages point to (the owner of a misplaced column, a table to join)."""
    tables = visible_tables(snapshot, policy)
    by_name = {t.name.lower(): t for t in tables}
    out: list[VisibleTable] = []
    names = re.findall(r"[A-Za-z_][A-Za-z0-9_]*", sql)
    for text in texts:
        for ref in _BACKTICKED.findall(text):
            names.extend(re.findall(r"[A-Za-z_][A-Za-z0-9_ ]*", ref))
    for w in names:
        t = by_name.get(w.lower())
        if t is not None and t not in out:
            out.append(t)
    return out


def repair_messages(
    messages: Sequence[Message],
    sql: str,
    violations: Sequence[str],
    *,
    fixes: Sequence[str] = (),
    tables: Sequence[VisibleTable] = (),
    snapshot: SchemaSnapshot | None = None,
    candidate: str | None = None,
) -> list[Message]:
    """The conversation extended by the refused statement and its violations, quoted back.

    Why this shape: small models given only a description of the problem tend to repeat the
    refused statement verbatim (greedy decoding, same prefix). So the feedback is short and
    concrete: the problems, then one instruction per fix ("replace `T2.name` with
    `T1.name`"), then the columns of exactly the tables involved, so the model sees where
    each column really lives without re-reading the whole schema. ``candidate`` is the refused
    statement with the checker's mechanical fixes applied (the caller checked that it passes):
    a small model copies a statement far more reliably than it edits one, and it still has
    to generate it token by token under the guide.
    """
    listed = "\n".join(f"{i}. {v}" for i, v in enumerate(dict.fromkeys(violations), 1))
    parts = [f"That SQL is wrong:\n{listed}"]
    counts = Counter(fixes)
    todo = [f if counts[f] == 1 else f"{f} (all {counts[f]} places)" for f in counts]
    if todo:
        parts.append("Fix it: " + "; ".join(todo) + ".")
    if candidate:
        parts.append(f"With those fixes the statement reads:\n{candidate}")
    if tables:
        visible = {(t.schema, t.name) for t in tables}
        qualify = len({t.schema for t in tables}) > 1
        if snapshot is not None and snapshot.default_schema:
            qualify = qualify or any(t.schema != snapshot.default_schema for t in tables)
        desc = "\n".join(describe_table(t, visible, qualify) for t in tables)
        parts.append(f"The tables involved:\n{desc}")
    parts.append(
        "Write the corrected SQL statement for the same question, using only tables and "
        "columns the schema shows."
    )
    return [
        *messages,
        {"role": "assistant", "content": sql},
        {"role": "user", "content": "\n\n".join(parts)},
    ]
