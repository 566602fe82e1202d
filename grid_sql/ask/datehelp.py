"""A prompt line of the dialect's date functions and casts, for questions about dates.

Why (issue #25 §4): on defog's PostgreSQL questions the date category is where the default
model failed most (date_functions: 26 of 35 executed, 5 right): it wrote other dialects'
date functions (``DATEADD``, ``YEAR(x)``) and compared dates with text. The prompt gave it
no help with this dialect's idioms. The line is shown only where the question needs dates,
so the other questions' prompts stay as they were (and keep their measured behaviour):

* the question says so: a date word (``year``, ``month``, ``since``, ``ago``, a month's
  name, ...) or a four-digit year;
* or a column the question names (its words overlap the column's) has a date or time type;

and only where the role can read some date- or time-typed column: a catalog that keeps its
dates as numbers or text gets no date functions suggested.

The idioms come from the dialect object (:attr:`grid_sql.dialect.Dialect.date_idioms`) and
name only functions the role may call (``Policy.allowed_functions``): the prompt never
suggests what the grammar would then refuse.

Measured (bench/RESULTS-defog.md, Qwen2.5-Coder-1.5B): on defog's date_functions questions
the line lost (one right answer and two executing ones fewer of twelve: the model reached for
``DATE_TRUNC``/interval arithmetic where plain date subtraction was right), so
``Asker(date_help=...)`` is off by default; the line stays available to measure on other
models.
"""

from __future__ import annotations

import re

from ..dialect import Dialect
from ..policy.model import Policy
from ..schema.model import SchemaSnapshot
from .tables import visible_tables, words

__all__ = ["DATE_WORDS", "date_line", "is_date_type", "needs_dates"]

# stems as ``prompt.words`` spells them (plural ``s`` removed)
DATE_WORDS = frozenset(
    """date dated day daily week weekly month monthly year yearly annual annually quarter
    quarterly time when since ago recent recently today yesterday tomorrow hour minute
    weekday weekend birthday anniversary duration timestamp earliest latest oldest newest
    january february march april may june july august september october november december
    jan feb mar apr jun jul aug sep sept oct nov dec ytd mtd""".split()
)
_YEAR = re.compile(r"\b(1[89]|20)\d\d\b")
_DATE_TYPE = re.compile(r"date|time|interval", re.IGNORECASE)


def is_date_type(type_name: str) -> bool:
    """A catalog type string that holds dates, times or intervals (``timestamp without time
    zone``, ``DATE``, ``DATETIME``, ``interval``)."""
    return bool(_DATE_TYPE.search(type_name))


def needs_dates(question: str, snapshot: SchemaSnapshot, policy: Policy) -> bool:
    """True when the question asks about dates (its words, or a date-typed column it names)
    and the role can read a date-typed column at all: where dates are stored as numbers or
    text (defog's ``atis`` times are BIGINT) the date functions would only mislead (measured:
    ``EXTRACT(MINUTE FROM arrival_time)`` on a BIGINT, bench/RESULTS-defog.md)."""
    dated = [
        col
        for table in visible_tables(snapshot, policy)
        for col in table.columns
        if is_date_type(col.type)
    ]
    if not dated:
        return False
    qwords = words(question)
    if qwords & DATE_WORDS or _YEAR.search(question):
        return True
    return any(words(col.name) & qwords for col in dated)


def date_line(question: str, snapshot: SchemaSnapshot, policy: Policy) -> str | None:
    """The dialect's date and cast line for ``question``, or None when it needs no dates
    (or the role may call none of the idioms' functions)."""
    if not needs_dates(question, snapshot, policy):
        return None
    dialect = Dialect.find(snapshot.dialect)
    if dialect is None:
        return None
    return dialect.date_prompt_line(policy.allowed_functions)
