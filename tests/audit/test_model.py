"""Auditing a real model generation: SmolLM2-135M through the GRID-owned decode loop."""

from __future__ import annotations

import dataclasses
import warnings
from pathlib import Path

import pytest

from grid_sql.audit import AuditLog, AuditStore, Explainer, Verifier
from grid_sql.audit.artifacts import refs_for
from grid_sql.decode.backend import LlamaCppBackend
from grid_sql.decode.loop import generate
from grid_sql.decode.models import fetch_model
from grid_sql.decode.records import StepKind
from grid_sql.mask.guide import Guide
from grid_sql.mask.vocab import Vocabulary, VocabularyIncompleteWarning

from .helpers import chinook_role

SYSTEM = (
    "You translate questions into one SQLite SELECT statement and output only the SQL. "
    "Tables: Customer(CustomerId, FirstName, LastName, Country), Artist(ArtistId, Name)."
)


@pytest.mark.slow
def test_smollm2_generation_is_audited_and_replays(tmp_path: Path) -> None:
    gguf = fetch_model("smollm2-135m")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", VocabularyIncompleteWarning)
        vocab = Vocabulary.from_gguf(gguf)
    backend = LlamaCppBackend(str(gguf), n_ctx=1024, vocab=vocab)
    grammar, policy_fp, schema_fp = chinook_role()
    guide = Guide(grammar, vocab)
    question = "List the names of all artists."
    prompt = backend.chat_prompt(
        [{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}]
    )
    gen = generate(backend, guide, prompt, max_tokens=40)
    log = AuditLog()
    log.extend(gen.records)
    rec = log.seal(
        stop_reason=gen.stop_reason,
        artifacts=refs_for(
            grammar, vocab, policy=policy_fp, schema=schema_fp, model_id=backend.model_id
        ),
        final_sql=gen.sql,
        question=question,
        user="tester",
        dialect="sqlite",
    )
    store = AuditStore(tmp_path / "audit.sqlite")
    store.append(rec, grammar=grammar, vocab=vocab)

    verifier = Verifier(store)
    rep = verifier.verify(rec.audit_id)
    assert rep.ok, rep.describe()
    assert rep.replayed == len(gen.records) and gen.records[-1].kind == StepKind.EOS

    # the model's first token, swapped for a blocked one, is caught by the replay
    steps = list(store.get(rec.audit_id).steps)
    steps[0] = dataclasses.replace(steps[0], token=vocab.eos_token_id)
    bad = verifier.verify_record(dataclasses.replace(rec, steps=tuple(steps)))
    assert bad.first is not None and (bad.first.step, bad.first.field) == (0, "chain link")
    why = Explainer(store, verifier).step(rec.audit_id, 0, "DROP TABLE Artist")
    assert "`DROP` is not in the role's verbs" in why
