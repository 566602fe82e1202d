"""When a repair round is not worth running: the same statement written again.

Why: a database refusal goes back to the model once (``Asker.ask``); small models decoding
greedily often write the refused statement again, token for token or differing only in
spacing and keyword case (issue #25: 6 of 10 PostgreSQL type-error retries were identical).
Running it again costs a round trip and reads as if something had been tried; the second
refusal says nothing new. So the retry is compared with the refused statement as the
dialect's tokenizer sees them, and an identical one is not run: the first refusal is
raised, saying so.
"""

from __future__ import annotations

from sqlglot.errors import TokenError
from sqlglot.tokens import Token, TokenType

from ..dialect import Dialect as OurDialect
from ..policy.checker import sqlglot_read

# Tokens whose text is data or a name: compared exactly. Every other token is a keyword,
# operator or punctuation, compared case-insensitively (``select`` and ``SELECT`` are one
# statement; ``'Brazil'`` and ``'brazil'`` or ``"Name"`` and ``"name"`` are not).
_EXACT = frozenset(
    {
        TokenType.STRING,
        TokenType.NATIONAL_STRING,
        TokenType.NUMBER,
        TokenType.IDENTIFIER,
        TokenType.VAR,
        TokenType.BIT_STRING,
        TokenType.HEX_STRING,
        TokenType.BYTE_STRING,
        TokenType.PARAMETER,
        TokenType.PLACEHOLDER,
    }
)


# Whether unquoted names are case-insensitive to the server is the dialect's
# ``unquoted_names_case_insensitive``: SQLite compares them case-insensitively, PostgreSQL
# folds them to lower case; MySQL/MariaDB table names are case-sensitive on a server with
# lower_case_table_names=0, so there only function names (an unquoted name before ``(``)
# are compared case-insensitively.


def _key(tokens: list[Token], folds: bool) -> tuple[tuple[object, str], ...]:
    toks = [t for t in tokens if t.token_type != TokenType.SEMICOLON]
    out = []
    for i, t in enumerate(toks):
        exact = t.token_type in _EXACT
        if t.token_type == TokenType.VAR:
            call = i + 1 < len(toks) and toks[i + 1].token_type == TokenType.L_PAREN
            exact = not (folds or call)
        out.append((t.token_type, t.text if exact else t.text.upper()))
    return tuple(out)


def same_statement(a: str, b: str, dialect: str) -> bool:
    """Whether ``a`` and ``b`` are the same statement to the database: equal token streams
    in ``dialect`` (whitespace, comments, a trailing ``;``, keyword and function-name case
    aside, and unquoted-name case where the dialect folds it; literals and quoted names
    exact). Text sqlglot cannot tokenize is compared byte for byte after trimming."""
    if a.strip() == b.strip():
        return True
    from sqlglot.dialects.dialect import Dialect

    d = Dialect.get_or_raise(sqlglot_read(dialect))
    try:
        folds = OurDialect.lookup(dialect).unquoted_names_case_insensitive
        return _key(d.tokenize(a), folds) == _key(d.tokenize(b), folds)
    except TokenError:
        return False
