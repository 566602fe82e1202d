"""Many generations over two roles: all replay bit-identically, every mutation is caught.

Chinook (select-only, Employee denied) and Spider's concert_singer (select-only), every
statement greedily spelled over Qwen2 as the decode loop would record it; one store, one
fresh verifier. Each generation then gets one mutation per record field, chosen at a
different step each time, in a consistent forgery (re-chained and re-sealed) so only the
replay can catch it.
"""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path

import pytest

from grid_sql.audit import AuditRecord, AuditStore, Verifier, chain_link, seal_hash
from grid_sql.audit.log import GENESIS
from grid_sql.decode.records import StepKind, StepRecord

from .helpers import (
    CHINOOK_SQL,
    SPIDER_DB,
    chinook_guide,
    chinook_role,
    seal_generation,
    spider_guide,
    spider_role,
    spider_sql,
)


def _forge(rec: AuditRecord, steps: list[StepRecord]) -> AuditRecord:
    links, prev = [], GENESIS
    for s in steps:
        prev = chain_link(prev, s)
        links.append(prev.hex())
    seal = {**rec.seal, "chain_head": prev.hex()}
    return AuditRecord(seal_hash(seal), seal, tuple(steps), tuple(links))


MUTATIONS = {
    "config_hash": lambda s: dataclasses.replace(s, config_hash=s.config_hash ^ (1 << 63)),
    "entry_ids": lambda s: dataclasses.replace(
        s, entry_ids=tuple(reversed(s.entry_ids)) if len(s.entry_ids) > 1 else ("00" * 16,)
    ),
    "mask_digest": lambda s: dataclasses.replace(s, mask_digest=s.mask_digest[::-1]),
    "allowed": lambda s: dataclasses.replace(s, allowed=s.allowed - 1),
    "blocked": lambda s: dataclasses.replace(s, blocked=s.blocked + 1),
    "kind": lambda s: dataclasses.replace(
        s, kind=StepKind.SAMPLED if s.kind == StepKind.EOS else StepKind.EOS
    ),
}


@pytest.mark.slow
def test_many_generations_replay_and_every_mutation_is_caught(tmp_path: Path) -> None:
    if not SPIDER_DB.is_file():
        pytest.skip("Spider concert_singer database not found")
    store = AuditStore(tmp_path / "audit.sqlite")
    recs: list[AuditRecord] = []
    for guide, role, sqls in (
        (chinook_guide(), chinook_role(), CHINOOK_SQL[:8]),
        (spider_guide(), spider_role(), spider_sql(3)),
    ):
        for sql in sqls:
            rec = seal_generation(guide, role, sql)
            store.append(rec, grammar=role[0], vocab=guide.vocab)
            recs.append(rec)
    verifier = Verifier(store)
    reports = [verifier.verify(r.audit_id) for r in recs]
    assert [r.describe() for r in reports if not r.ok] == []
    total = sum(r.replayed for r in reports)
    assert total == sum(len(r.steps) for r in recs) > 150
    assert len({r.artifacts.grammar for r in recs}) == 2

    rng = random.Random(20261203)
    caught = 0
    for rec in recs:
        for field, mutate in MUTATIONS.items():
            k = rng.randrange(len(rec.steps))
            steps = list(rec.steps)
            steps[k] = mutate(steps[k])
            if steps[k] == rec.steps[k]:
                continue
            rep = verifier.verify_record(_forge(rec, steps), first_only=True)
            assert not rep.ok, (field, k)
            assert rep.first is not None and rep.first.step == k, rep.describe()
            caught += 1
    assert caught >= len(recs) * len(MUTATIONS) - len(recs)  # a no-op edit is skipped
