"""sqlglot parsing behind a guard against its one known exponential case.

sqlglot reads ``date(``, ``char(``, ``time(`` ... as a possible data type with a size first
and backtracks when that fails, so its parse time doubles with each directly nested call of
such a name (14 levels: 1.4 s; 20: minutes). A small model can generate exactly that
(``ORDER BY date(offsets(date(date(...``, bench/RESULTS-spider.md §11), and every place that
parses generated SQL (the checker, the executor's one-statement check, the prompt's repair
hints) would hang on it. Beyond :data:`MAX_TYPE_CALL_DEPTH` nested calls the text is refused
as unparseable (fail closed) after a linear token scan, before sqlglot's parser runs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError
from sqlglot.parser import Parser
from sqlglot.tokenizer_core import Token, TokenType

MAX_TYPE_CALL_DEPTH = 10
_T = TypeVar("_T")


def type_call_depth(sql: str, read: str, tokens: Sequence[Token] | None = None) -> int:
    """The deepest nesting of calls whose name sqlglot also reads as a data type (``date(``,
    ``time(``, ``char(``, ...), by a linear scan of its tokens (0 if it does not tokenize).
    ``tokens``: ``sql`` already tokenized in ``read`` (not tokenized again)."""
    if tokens is None:
        try:
            tokens = sqlglot.Dialect.get_or_raise(read).tokenize(sql)
        except TokenError:
            return 0
    typed = Parser.TYPE_TOKENS
    stack: list[bool] = []
    depth = deepest = 0
    prev = None
    for t in tokens:
        if t.token_type == TokenType.L_PAREN:
            is_type = prev is not None and prev in typed
            stack.append(is_type)
            depth += is_type
            deepest = max(deepest, depth)
        elif t.token_type == TokenType.R_PAREN and stack:
            depth -= stack.pop()
        prev = t.token_type
    return deepest


def too_deep(sql: str, read: str, tokens: Sequence[Token] | None = None) -> str | None:
    """Why ``sql`` is refused before parsing (None: it may be parsed)."""
    depth = type_call_depth(sql, read, tokens)
    if depth <= MAX_TYPE_CALL_DEPTH:
        return None
    return (
        f"the statement nests {depth} calls of type-named functions (`date(`, `char(`, ...) "
        f"inside each other; at most {MAX_TYPE_CALL_DEPTH} are analysed"
    )


_TOO_NESTED = (
    "the statement is nested too deeply to be parsed (sqlglot exceeded Python's recursion limit)"
)


def _guarded(fn: Callable[..., _T], sql: str, read: str) -> _T:
    why = too_deep(sql, read)
    if why is not None:
        raise ParseError(why)
    try:
        return fn(sql, read=read)
    except RecursionError:
        raise ParseError(_TOO_NESTED) from None


def parse(sql: str, read: str) -> list[exp.Expr | None]:
    """``sqlglot.parse`` that raises :class:`sqlglot.errors.ParseError` instead of running
    into the exponential case (see the module docs), and instead of the ``RecursionError``
    sqlglot's recursive descent gives on a deeply nested statement (``degrees(degrees(...``
    a few hundred deep): every caller already treats a parse error as fail-closed."""
    return _guarded(sqlglot.parse, sql, read)


def parse_one(sql: str, read: str) -> exp.Expr:
    """``sqlglot.parse_one`` behind the same guards."""
    stmt: exp.Expr = _guarded(sqlglot.parse_one, sql, read)
    return stmt
