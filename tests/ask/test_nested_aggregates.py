"""The repair round after a nested aggregate (docs/scope.md, "Aggregates where they run").

defog's ratio questions drew ``SUM(CASE WHEN COUNT(x) > 1 THEN 1 ELSE 0 END)`` from the 1.5B
model; the checker refused it (``aggregate_misuse``) and the repair round wrote the same
nesting again (q145, q148, q149). The round after such a refusal now generates under the
narrowed role grammar, in which no aggregate can be called inside an aggregate's arguments.
"""

from __future__ import annotations

from pathlib import Path

from grid_sql.ask.asker import Asker
from grid_sql.ask.prompt import Example
from grid_sql.audit.store import AuditStore
from grid_sql.errors import PolicyViolation
from grid_sql.policy.aggregates import nests_aggregates

QUESTION = "What fraction of albums have more than 10 tracks?"
NESTED = (
    "SELECT CAST(SUM(CASE WHEN COUNT(TrackId) > 10 THEN 1 ELSE 0 END) AS REAL) / COUNT(*) "
    "FROM Track"
)


def test_nests_aggregates() -> None:
    assert nests_aggregates(NESTED, "sqlite")
    assert nests_aggregates("SELECT AVG(COUNT(*)) FROM t GROUP BY a", "postgresql")
    assert not nests_aggregates("SELECT SUM(COUNT(*)) OVER () FROM t GROUP BY a", "postgresql")
    assert not nests_aggregates("SELECT SUM((SELECT COUNT(*) FROM u)) FROM t", "sqlite")
    assert not nests_aggregates("SELECT COUNT(*) FROM t WHERE", "sqlite")  # no parse: False


def test_the_repair_round_cannot_nest_again(
    smollm2: object, chinook_copy: Path, tmp_path: Path
) -> None:
    """The model copies its nested example; the checker refuses it; the repair round runs
    under the narrowed grammar (its sealed grammar differs from the first round's) and
    whatever it writes calls no aggregate inside another."""
    store = AuditStore(tmp_path / "audit.sqlite")
    asker = Asker(
        chinook_copy,
        model=smollm2,  # type: ignore[arg-type]
        audit=store,
        max_tokens=96,
        examples=[Example(QUESTION, NESTED)],
        date_help=False,
    )
    try:
        gen = asker.generate_sql(QUESTION)
        final, repairs = gen.sql, gen.repairs
    except PolicyViolation as exc:
        final, repairs = exc.sql or "", exc.repairs
    first = repairs[0]
    assert first.kind == "checker" and nests_aggregates(first.sql, "sqlite"), first.sql
    assert any("cannot be nested" in v for v in first.violations)
    assert final and not nests_aggregates(final, "sqlite"), final
    grammars = [seal["artifacts"]["grammar"] for _, seal in store.iter_seals()]
    assert len(grammars) == 2 and grammars[0] != grammars[1], grammars
