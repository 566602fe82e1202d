"""Console helpers shared by the command line and the terminal fronts (demo, chat).

They live in ``front`` rather than in ``grid_sql.cli`` so that the fronts which print results
(``front.demo``, ``front.chat``) never import the command line above them: ``cli`` parses
arguments and dispatches, these functions format and report.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TextIO

from ..errors import AboutStatement

EXIT_ERROR = 1
EXIT_USAGE = 2


def _tqdm() -> Any:
    from tqdm import tqdm  # type: ignore[import-untyped]

    return tqdm


@contextmanager
def progress(label: str) -> Iterator[None]:
    """An indeterminate tqdm bar on stderr while a slow step (model load, generation) runs."""
    bar = _tqdm()(
        total=1,
        desc=label,
        file=sys.stderr,
        disable=None,
        leave=False,
        bar_format="{desc}: {elapsed}",
    )
    try:
        yield
        bar.update(1)
    finally:
        bar.close()


@contextmanager
def token_progress(max_tokens: int, label: str = "generating") -> Iterator[Callable[[Any], None]]:
    """A tqdm bar on stderr advanced once per decoded token (pass the callback as on_step)."""
    bar = _tqdm()(
        total=max_tokens, desc=label, unit="tok", file=sys.stderr, disable=None, leave=False
    )

    def step(_record: Any) -> None:
        bar.update(1)

    try:
        yield step
    finally:
        bar.close()


def error_payload(exc: BaseException, question: str | None = None) -> dict[str, Any]:
    """The ``--json`` object for a failure: same keys as a result, ``error`` set."""
    violations = [getattr(v, "message", str(v)) for v in getattr(exc, "violations", []) or []]
    about = exc if isinstance(exc, AboutStatement) else AboutStatement()
    audit_ids = list(about.audit_ids)
    return {
        "question": question,
        "sql": about.sql,
        "columns": [],
        "rows": [],
        "truncated": False,
        "rowcount": 0,
        "audit_id": audit_ids[-1] if audit_ids else None,
        "audit_ids": audit_ids,
        "repairs": [r.to_dict() for r in about.repairs],
        "violations": violations,
        "error": str(exc),
        "error_type": type(exc).__name__,
        "needs": list(getattr(exc, "needs", []) or []),  # PolicyRefusal: the denied objects
    }


def format_table(columns: Sequence[str], rows: Sequence[Sequence[Any]], width: int = 40) -> str:
    """A plain text table (cells cut at ``width`` characters; numbers rounded per column for
    reading, ``grid_sql.ask.display``: the rows themselves are not changed)."""
    from ..ask.display import display_rows

    def cell(s: str) -> str:
        return s if len(s) <= width else s[: width - 1] + "…"

    body = [[cell(v) for v in r] for r in display_rows(columns, rows)]
    heads = [str(c) for c in columns]
    widths = [max([len(h)] + [len(r[i]) for r in body]) for i, h in enumerate(heads)]
    line = "  ".join(h.ljust(w) for h, w in zip(heads, widths, strict=True))
    sep = "  ".join("-" * w for w in widths)
    out = [line, sep]
    out.extend("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in body)
    return "\n".join(out)


def print_result(res: Any, out: TextIO) -> None:
    """SQL, rows and the one-line audit summary of an :class:`AskResult`."""
    print(f"SQL: {res.sql}", file=out)
    for rep in res.repairs:
        print(
            f"  (refused attempt {rep.round}: {rep.sql!r}: {'; '.join(rep.violations)})", file=out
        )
    if res.columns:
        print(format_table(res.columns, res.rows), file=out)
        if res.truncated:
            print(f"… more rows exist (capped at {len(res.rows)}; see --max-rows)", file=out)
    elif getattr(res, "preview", None) is not None:
        print(f"{res.rowcount} row(s) would be affected (dry run: nothing changed)", file=out)
    else:
        print(f"{res.rowcount} row(s) affected", file=out)
    print(res.audit_summary(), file=out)
