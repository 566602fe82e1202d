"""The prompt budget: the schema the model is shown always fits its context window.

Why (issue #25 §2): the prompt used to describe the top 16 tables and then list every other
table by name with no bound, with llama.cpp's context fixed at 4096 tokens; on Chinook plus
2,000 other tables the first question died with "context window of 4096 tokens exceeded".
Now the first prompt gets a token budget derived from the context window and the schema
shrinks until it fits, in this order: fewer tables described in full (most relevant first,
:mod:`grid_sql.schema.linking` on large catalogs), a table's columns narrowed to its keys and
the columns the question names, then tables by name only, then a count of the tables left out.

The budget of the first prompt is ``n_ctx - max_tokens - MARGIN``, less ``max_tokens +
min(REPAIR_RESERVE, n_ctx / 8)`` when a repair round may follow (that round re-sends the first
prompt with the refused statement and the checker's feedback, and generates again); a repair
prompt that would still not fit loses table descriptions from its feedback first
(:func:`fit_repair`). Tokens are counted with the loaded backend's own tokenizer and chat
template; with no local model (a :class:`~grid_sql.serve.client.RemoteAsker`, or
``Asker.messages()`` before a model is loaded) the count is the text's UTF-8 byte length, an
upper bound for byte-level BPE vocabularies (no token is shorter than one byte) plus a
per-message allowance for the chat template's special tokens.

Nothing here narrows the grammar: every table the role may read stays in the lexicon, so a
table the prompt left out can still be written (and is checked like any other).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import ContextOverflowError, OptionError
from ..schema.linking import Linker, cached_linker

if TYPE_CHECKING:  # pragma: no cover - typing only
    from ..decode.backend import Backend
    from ..policy.model import Policy
    from ..schema.model import SchemaSnapshot
    from .prompt import Message
    from .tables import VisibleTable
    from .values import ColumnValues

MARGIN = 16  # tokens kept free beyond the answer: a stop token, a template's closing tokens
REPAIR_RESERVE = 512  # the repair round's feedback (violations, fixes, tables involved);
# at most an eighth of the context (a small context keeps room for the first prompt)
TEMPLATE_ALLOWANCE = 16  # per message, byte-count mode: role markers and special tokens
LINK_ABOVE = 64  # more visible tables than this: the linker ranks them (see schema_text)
DEFAULT_MAX_NAMES = 64  # tables listed by name only, at most (then "and N more")
COMPACT_COLUMNS = 8  # columns of a narrowed table description
MIN_PROMPT = 128  # a first-prompt budget below this cannot hold rules and a question

Count = Callable[[str], int]


@dataclass(frozen=True)
class PromptBudget:
    """How many tokens a prompt may take and how to count them.

    ``first``: the first round's whole prompt (chat template included); ``total``: any
    prompt, repair rounds included (``n_ctx - max_tokens - MARGIN``)."""

    n_ctx: int
    first: int
    total: int
    count_text: Count
    count_messages: Callable[[Sequence[Message]], int]
    exact: bool  # counted with the model's tokenizer (False: the byte bound)

    def fits(self, msgs: Sequence[Message], limit: int | None = None) -> bool:
        return self.count_messages(msgs) <= (self.first if limit is None else limit)


def limits(n_ctx: int, max_tokens: int, repair: bool) -> tuple[int, int]:
    """(first-prompt budget, any-prompt budget) for a context of ``n_ctx`` tokens, or
    :class:`OptionError` when ``max_tokens`` leaves no room for a prompt."""
    total = n_ctx - max_tokens - MARGIN
    first = total - (max_tokens + min(REPAIR_RESERVE, n_ctx // 8) if repair else 0)
    if first < MIN_PROMPT:
        raise OptionError(
            f"n_ctx={n_ctx} with max_tokens={max_tokens}"
            f"{' and a repair round' if repair else ''} leaves {first} tokens for the prompt "
            f"(at least {MIN_PROMPT} needed): raise n_ctx or lower max_tokens"
        )
    return first, total


def byte_count(text: str) -> int:
    return len(text.encode("utf-8"))


def for_backend(backend: Backend, n_ctx: int, max_tokens: int, repair: bool) -> PromptBudget:
    """A budget counted with ``backend``'s tokenizer and chat template."""
    first, total = limits(n_ctx, max_tokens, repair)
    return PromptBudget(
        n_ctx,
        first,
        total,
        backend.count_tokens,
        lambda msgs: len(backend.chat_prompt(msgs)),
        exact=True,
    )


def by_bytes(n_ctx: int, max_tokens: int, repair: bool) -> PromptBudget:
    """A budget counted in UTF-8 bytes (an upper bound on tokens; see the module doc)."""
    first, total = limits(n_ctx, max_tokens, repair)

    def count_messages(msgs: Sequence[Message]) -> int:
        return sum(byte_count(m["content"]) + TEMPLATE_ALLOWANCE for m in msgs) + 8

    return PromptBudget(n_ctx, first, total, byte_count, count_messages, exact=False)


def fit_messages(
    build: Callable[[int | None], list[Message]], budget: PromptBudget
) -> list[Message]:
    """``build(room)`` with the largest schema ``room`` (tokens) whose whole prompt fits
    ``budget.first``; ``build(-1)`` is the prompt with no schema at all.

    The schema is assembled from per-table counts, and a tokenizer may merge across the
    joins, so the whole prompt is counted again and the room lowered by any overshoot."""
    overhead = budget.count_messages(build(-1))
    room = budget.first - overhead
    if room < 0:
        raise ContextOverflowError(
            f"the prompt without any table takes {overhead} tokens, over the budget of "
            f"{budget.first} (n_ctx {budget.n_ctx}); shorten the question or examples, raise "
            "n_ctx or lower max_tokens"
        )
    for _ in range(6):
        msgs = build(room)
        n = budget.count_messages(msgs)
        if n <= budget.first:
            return msgs
        room -= n - budget.first + 8
        if room < 0:
            break
    return build(-1)  # fits: it is the overhead measured above


def fit_repair(msgs: list[Message], budget: PromptBudget | None) -> list[Message]:
    """A repair prompt that fits ``budget.total``: table lines of its "tables involved"
    section dropped from the end until it does; :class:`ContextOverflowError` if it still
    does not (the first prompt's reserve was too small for this feedback)."""
    if budget is None or budget.fits(msgs, budget.total):
        return msgs
    head, last = msgs[:-1], msgs[-1]
    parts = last["content"].split("\n\n")
    marker = "The tables involved:"
    at = next((i for i, p in enumerate(parts) if p.startswith(marker)), None)
    if at is not None:
        lines = parts[at].split("\n")
        while len(lines) > 1:
            lines.pop()
            trial = parts[:at] + (["\n".join(lines)] if len(lines) > 1 else []) + parts[at + 1 :]
            out = [*head, {"role": last["role"], "content": "\n\n".join(trial)}]
            if budget.fits(out, budget.total):
                return out
    raise ContextOverflowError(
        f"the repair round's prompt takes {budget.count_messages(msgs)} tokens, over the "
        f"budget of {budget.total} (n_ctx {budget.n_ctx}); raise n_ctx or lower max_tokens"
    )


def check_room(backend: Backend, n_prompt: int, max_tokens: int) -> None:
    """Refuse, before any model call, a generation whose prompt and budget overflow the
    backend's context (the budget above makes this unreachable from the Asker's own
    prompts; it guards hand-built ones)."""
    if n_prompt + max_tokens > backend.n_ctx:
        raise ContextOverflowError(
            f"a prompt of {n_prompt} tokens plus max_tokens={max_tokens} exceeds the context "
            f"window of {backend.n_ctx} tokens"
        )


# ----------------------------------------------------------------------------- schema


def linker_for(snapshot: SchemaSnapshot, policy: Policy) -> Linker[VisibleTable]:
    """The linker over the role's visible tables, built once per (schema, policy)."""
    from .tables import visible_tables

    key = (snapshot.fingerprint, policy.fingerprint)
    return cached_linker(key, lambda: visible_tables(snapshot, policy))


def render_schema(
    question: str,
    snapshot: SchemaSnapshot,
    policy: Policy,
    *,
    max_tables: int,
    max_chars: int,
    values: Mapping[tuple[str, str], Mapping[str, ColumnValues]] | None,
    room: int | None,
    count: Count,
    max_names: int = DEFAULT_MAX_NAMES,
) -> str:
    """The schema text: tables in full, narrowed, by name, then a count of the rest.

    ``room``: tokens the text may take (None: unbounded, the behaviour before the budget
    apart from the ``max_names`` cap). Up to ``LINK_ABOVE`` visible tables they are ordered
    by the prompt's original ranker (the order every published measurement used); above,
    by the linker."""
    from .tables import _q, describe_table, rank_tables

    linker = linker_for(snapshot, policy)
    tables = linker.tables
    visible = {(t.schema, t.name) for t in tables}
    qualify = len({t.schema for t in tables}) > 1 or any(
        t.schema != snapshot.default_schema for t in tables if snapshot.default_schema
    )
    linked = linker.link(question)  # the columns a question names: kept when narrowing
    matched = {(x.table.schema, x.table.name): x.columns for x in linked}
    if len(tables) > LINK_ABOVE:
        ranked = [x.table for x in linked]
    else:
        ranked = rank_tables(question, tables) if len(tables) > 1 else tables
    left = room
    shown: list[str] = []
    rest: list[VisibleTable] = []
    used_chars = 0

    def take(text: str) -> bool:
        nonlocal left
        if left is None:
            return True
        cost = count(text) + 1  # the newline (or ", ") that joins it
        if cost > left:
            return False
        left -= cost
        return True

    big = len(tables) > LINK_ABOVE
    for i, t in enumerate(ranked):
        if len(shown) >= max_tables or (shown and used_chars >= max_chars):
            rest.extend(ranked[i:])
            break
        if big and len(rest) >= 2 * max_tables:  # the least relevant need not be tried
            rest.extend(ranked[i:])  # (10,000 tables: 3.7 s of describing per prompt)
            break
        tv = (values or {}).get((t.schema, t.name))
        text = describe_table(t, visible, qualify, tv)
        if shown and used_chars + len(text) > max_chars:
            rest.append(t)
            continue
        if not take(text):
            narrow = _narrowed(t, matched.get((t.schema, t.name), ()))
            if narrow is None:
                rest.append(t)
                continue
            sub, hidden = narrow
            text = describe_table(sub, visible, qualify, tv) + f" -- {hidden} more columns"
            if not take(text):
                rest.append(t)
                continue
        shown.append(text)
        used_chars += len(text)
    out = "\n".join(shown)
    if not rest:
        return out
    head = "-- Other tables you may also query (columns not shown): "
    tail_reserve = 0 if left is None else count(" (and 100000 more not listed)") + 1
    if left is not None:
        left -= tail_reserve
    names: list[str] = []
    if take(head):
        for t in rest[:max_names]:
            name = f"{_q(t.schema)}.{_q(t.name)}" if qualify else _q(t.name)
            if not take(name):
                break
            names.append(name)
    more = len(rest) - len(names)
    line = (head + ", ".join(names)) if names else ""
    if more and names:
        line += f" (and {more} more not listed)"
    elif more:
        line = f"-- {more} other tables you may query are not listed"
    return f"{out}\n{line}" if out else line


def _narrowed(t: VisibleTable, matched: Sequence[str]) -> tuple[VisibleTable, int] | None:
    """``t`` with its key columns, then the columns the question names (best first), then
    its first others, up to :data:`COMPACT_COLUMNS`; None when that would hide nothing."""
    from .tables import VisibleTable

    by_name = {c.name: c for c in t.columns}
    keys = set(t.info.primary_key) | {c for fk in t.info.foreign_keys for c in fk.columns}
    keep = [c for c in t.columns if c.name in keys]
    for c in [by_name[n] for n in matched if n in by_name] + list(t.columns):
        if len(keep) >= max(COMPACT_COLUMNS, len(keys)):
            break
        if c not in keep:
            keep.append(c)
    if len(keep) >= len(t.columns):
        return None
    order = {c.name: i for i, c in enumerate(t.columns)}
    keep.sort(key=lambda c: order[c.name])
    return VisibleTable(t.schema, t.info, tuple(keep)), len(t.columns) - len(keep)
