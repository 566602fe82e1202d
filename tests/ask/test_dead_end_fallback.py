"""Defence in depth for dead ends (issue #29 §3), with the real Qwen2.5-Coder-0.5B on Chinook.

Propositions 8/9 say a masked generation never reaches a prefix it cannot finish; the scoped
role grammars broke that once (``ORDER BY TotalSp``). Should a broken precondition ever
surface again, the Asker must not hand the user a bare ``MaskError``: it records the incident
and generates once more on the unscoped role grammar (still exact for the role; the checker
covers columns). The fault is injected where the report's fault was (the reserve's search for
a way to finish the pending lexeme, under scopes only); model, grammars, checker, database and
audit store are the real ones.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from grid_sql.ask.asker import Asker
from grid_sql.ask.components import guide_for
from grid_sql.audit import AuditStore, Verifier
from grid_sql.errors import MaskError
from grid_sql.mask.reserve import ReserveTable, reserve_table

QUESTION = "Which 5 tracks are the longest? Show their names and lengths, longest first."


def _in_order_by(cfg, order: int) -> bool:  # type: ignore[no-untyped-def]
    """Whether ``ORDER BY`` is on the stack below the pending lexeme (a sort key is next)."""
    node = cfg.stack
    while node is not None and node.parent is not None:
        if node.parent.symbol == order:
            return node is not cfg.stack or not cfg.scan.rem.upper().startswith(b"B")
        node = node.parent
    return False


def _forget_completions(asker: Asker) -> None:
    """Drop the reserve completions earlier tests computed, so the injected fault fires: the
    reserve table's memo and the costs kept on the guide's warm records
    (``Matcher.cost_after``)."""
    reserve_table(asker.grammar, asker.backend.vocab)._memo.clear()
    guide_for(asker.grammar, asker.backend)._warm.clear()


def _broken_under_scopes(monkeypatch: pytest.MonkeyPatch, order: int) -> list[bytes]:
    """Make the scoped grammars' reserve find no way to finish a pending identifier after
    ``ORDER`` (what the report saw); returns the pending lexemes it failed on."""
    seen: list[bytes] = []
    real = ReserveTable._close_pending

    def close(self: ReserveTable, cfg):  # type: ignore[no-untyped-def]
        rem = cfg.scan.rem
        if self.grammar.scopes is not None and rem[:1].isalpha() and _in_order_by(cfg, order):
            seen.append(rem)
            return None
        return real(self, cfg)

    monkeypatch.setattr(ReserveTable, "_close_pending", close)
    return seen


def test_a_dead_end_is_recorded_and_answered_unscoped(
    chinook_copy: Path,
    qwen: object,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = AuditStore(tmp_path / "audit.sqlite")
    asker = Asker(chinook_copy, model=qwen, audit=store)  # type: ignore[arg-type]
    seen = _broken_under_scopes(monkeypatch, asker.grammar.terminal_ids["ORDER"])
    _forget_completions(asker)
    with caplog.at_level(logging.WARNING, logger="grid_sql"):
        res = asker.ask(QUESTION)
    assert seen, "the injected fault never fired: the test would prove nothing"
    dead = [r for r in res.repairs if r.kind == "dead_end"]
    assert len(dead) == 1 and "no way to finish the pending lexeme" in dead[0].violations[0]
    assert "ORDER BY" in dead[0].sql.upper()  # where it happened
    assert res.rows and "ORDER BY" in res.sql.upper(), res.sql
    assert any("dead end" in r.getMessage() for r in caplog.records)
    assert res.audit_id is not None
    rec = store.get(res.audit_id)
    assert "dead-end-fallback" in rec.seal["flags"]
    assert rec.seal["artifacts"]["grammar"] != asker.grammar.fingerprint  # the unscoped one
    report = Verifier(store).verify(res.audit_id)
    assert report.ok, report.describe()


def test_without_scopes_the_error_surfaces_typed(
    chinook_copy: Path, qwen: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With scopes off there is no narrower view to blame and nothing to fall back to: the
    typed error surfaces, carrying where it happened; nothing was executed."""
    asker = Asker(chinook_copy, model=qwen, audit=False, scopes=False, repair=False)  # type: ignore[arg-type]
    real = ReserveTable._close_pending
    order = asker.grammar.terminal_ids["ORDER"]

    def close(self: ReserveTable, cfg):  # type: ignore[no-untyped-def]
        if cfg.scan.rem[:1].isalpha() and _in_order_by(cfg, order):
            return None
        return real(self, cfg)

    monkeypatch.setattr(ReserveTable, "_close_pending", close)
    _forget_completions(asker)
    with pytest.raises(MaskError) as info:
        asker.generate_sql(QUESTION)
    assert info.value.partial is not None and "ORDER BY" in info.value.partial.upper()
