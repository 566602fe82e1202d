"""Dialect differences live on the dialect objects (issue #24 §1): no module outside
``grid_sql/dialect/`` branches on a dialect's name, so a fourth dialect needs a dialect class,
a grammar file and tests, and nothing else. This test greps the source to keep it so."""

from __future__ import annotations

import re
from pathlib import Path

import grid_sql
from grid_sql.dialect import Dialect

ROOT = Path(grid_sql.__file__).parent
_NAMES = "|".join(
    sorted({n for d in map(Dialect.get, Dialect.names()) for n in (d.name, *d.aliases)})
)
# A comparison with, membership in, or a table keyed by a dialect's name, and the per-dialect
# tables these replaced.
BRANCH = re.compile(
    r"dialect\s*(==|!=)|dialect\s+(not\s+)?in\s*[(\[{]"
    rf"|(==|!=)\s*[\"']({_NAMES})[\"']"
    rf"|\bin\s*[(\[{{]\s*[\"']({_NAMES})[\"']"
    rf"|^\s*[\"']({_NAMES})[\"']\s*:"
    r"|DIALECT_LABEL|_SQLGLOT_DIALECT",
    re.IGNORECASE,
)


def branches(text: str) -> list[str]:
    """The lines of ``text`` that branch on a dialect's name."""
    return [line.strip() for line in text.splitlines() if BRANCH.search(line)]


def test_no_dialect_name_branches_outside_the_dialect_package() -> None:
    found = [
        f"{p.relative_to(ROOT.parent)}: {line}"
        for p in sorted(ROOT.rglob("*.py"))
        if ROOT / "dialect" not in p.parents
        for line in branches(p.read_text(encoding="utf-8"))
    ]
    assert found == [], "ask the Dialect object instead:\n" + "\n".join(found)


def test_the_grep_sees_the_branches_it_forbids() -> None:
    for line in (
        'if dialect == "sqlite":',
        "if self.c.dialect != 'mysql' or x:",
        'exact = dialect in ("postgresql", "sqlite")',
        'if url.get_backend_name() == "sqlite":',
        '    "postgres": "to_char(x)",',
        'folds = name in {"sqlite", "postgresql"}',
        'DIALECT_LABEL = {"sqlite": "SQLite"}',
    ):
        assert branches(line), line
    for line in ('d = Dialect.get("sqlite")', "if d.dual_table and name == 'dual':"):
        assert not branches(line), line
