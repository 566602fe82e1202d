"""Previewed writes and explicit DDL (#27 §4): ``dry_run=True`` changes nothing and reports
what would change; ``allow_writes`` means INSERT/UPDATE/DELETE(/MERGE), DDL only when the
application policy names its verb; on SQLite and on the real PostgreSQL/MariaDB servers."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from grid_sql.ask.asker import Asker
from grid_sql.ask.preview import check_previewable, sample_query
from grid_sql.audit import AuditStore
from grid_sql.audit.verify import verify
from grid_sql.errors import OptionError, PolicyViolation

ROCK = "UPDATE Track SET Milliseconds = 0 WHERE GenreId = 1"


def _state(path: Path) -> tuple[int, int, int]:
    con = sqlite3.connect(path)
    try:
        row = con.execute(
            "SELECT count(*), sum(Milliseconds), (SELECT count(*) FROM InvoiceLine) FROM Track"
        ).fetchone()
        return int(row[0]), int(row[1]), int(row[2])
    finally:
        con.close()


def _tables(path: Path) -> set[str]:
    con = sqlite3.connect(path)
    try:
        return {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    finally:
        con.close()


def test_allow_writes_is_dml_and_ddl_needs_its_verb_named(chinook_copy: Path) -> None:
    asker = Asker(chinook_copy, audit=False, allow_writes=True)  # no policy file at all
    assert asker.policy.statement_verbs == {"select", "insert", "update", "delete"}
    assert not asker.checker.check("DELETE FROM Genre WHERE GenreId = 25")
    for ddl in ("DROP TABLE Genre", "CREATE TABLE t (x int)", "ALTER TABLE Genre ADD x int"):
        with pytest.raises(PolicyViolation):
            asker.run_sql(ddl, allow_writes=True)
    assert "Genre" in _tables(chinook_copy)
    assert "DDL runs only when" in asker.explain_policy()
    named = Asker(
        chinook_copy,
        audit=False,
        allow_writes=True,
        policy={"verbs": ["select", "insert", "update", "delete", "drop"]},
    )
    assert named.policy.statement_verbs == {"select", "insert", "update", "delete", "drop"}
    # a previewed DROP on SQLite (transactional DDL) runs, is rolled back, and changes nothing
    res = named.run_sql("DROP TABLE Genre", allow_writes=True, dry_run=True)
    assert res.dry_run and res.preview is not None and "Genre" in _tables(chinook_copy)


def test_a_dry_run_changes_nothing_and_shows_the_rows(chinook_copy: Path, tmp_path: Path) -> None:
    store = AuditStore(tmp_path / "audit.sqlite")
    asker = Asker(chinook_copy, audit=store, allow_writes=True)
    before = _state(chinook_copy)
    res = asker.run_sql(ROCK, dry_run=True)
    con = sqlite3.connect(chinook_copy)
    rock = con.execute("SELECT count(*) FROM Track WHERE GenreId = 1").fetchone()[0]
    con.close()
    assert res.rowcount == rock > 10 and res.dry_run
    assert res.preview is not None and res.preview.sampled and res.preview.verb == "update"
    assert len(res.preview.rows) == 10 and "Milliseconds" in res.preview.columns
    ms = res.preview.columns.index("Milliseconds")
    assert all(r[ms] > 0 for r in res.preview.rows)  # the rows before the change
    deleted = asker.run_sql("DELETE FROM InvoiceLine WHERE InvoiceId = 1", dry_run=True)
    assert deleted.rowcount == len(deleted.preview.rows) == 2  # type: ignore[union-attr]
    assert _state(chinook_copy) == before
    assert res.to_dict()["preview"]["rowcount"] == rock
    # the audit chain says it was a preview, not a committed write
    (out,) = verify(store, res.audit_id or "").outcomes
    assert out.ran and out.dry_run and out.rowcount == rock and "previewed" in out.describe()
    real = asker.run_sql(ROCK)
    assert not real.dry_run and real.rowcount == rock and _state(chinook_copy) != before
    (out,) = verify(store, real.audit_id or "").outcomes
    assert not out.dry_run


def test_sample_query_and_refusals() -> None:
    q = sample_query("DELETE FROM item WHERE price > 10", "postgresql", None, 5)
    assert q == "SELECT * FROM item WHERE price > 10 LIMIT 5"
    assert (
        sample_query("UPDATE a SET x = 1 FROM b WHERE a.id = b.id", "postgresql", None, 5) is None
    )
    for joined, dialect in [
        ("DELETE FROM a USING b WHERE a.id = b.id", "postgresql"),
        ("UPDATE a JOIN b ON a.id = b.id SET a.x = 1", "mysql"),
        ("DELETE a FROM a JOIN b ON a.id = b.id", "mysql"),
    ]:
        assert sample_query(joined, dialect, None, 5) is None, joined
    assert sample_query("INSERT INTO item VALUES (1, 'a', 2)", "postgresql", None, 5) is None
    check_previewable("update", "mysql")
    for verb in ("drop", "create", "alter", "truncate"):
        with pytest.raises(OptionError):  # MySQL/MariaDB DDL commits implicitly
            check_previewable(verb, "mysql")
        check_previewable(verb, "postgresql")


@pytest.mark.db
@pytest.mark.parametrize("server", ["pg_front", "my_front"])
def test_dry_run_on_real_servers_changes_nothing(
    server: str, request: pytest.FixtureRequest
) -> None:
    url = request.getfixturevalue(server)("gs_front_rw")
    asker = Asker(url, audit=False, allow_writes=True)
    assert not asker.policy.statement_verbs & {"create", "drop", "alter", "truncate"}
    probe = "SELECT count(*), sum(price) FROM item WHERE id <= 3"
    before = asker.run_sql(probe).rows
    res = asker.run_sql("UPDATE item SET price = price + 1000 WHERE id <= 3", dry_run=True)
    assert res.rowcount == 3 and res.preview is not None and res.preview.sampled
    assert [r[0] for r in res.preview.rows] == [1, 2, 3] or sorted(
        r[res.preview.columns.index("id")] for r in res.preview.rows
    ) == [1, 2, 3]
    assert asker.run_sql(probe).rows == before
    ins = asker.run_sql("INSERT INTO note (id, body) VALUES (987654, 'preview')", dry_run=True)
    assert ins.rowcount == 1 and not ins.preview.sampled  # type: ignore[union-attr]
    assert asker.run_sql("SELECT count(*) FROM note WHERE id = 987654").rows == [(0,)]
