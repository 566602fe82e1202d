"""The GRID-owned decode loop on a real model: SmolLM2-135M through llama.cpp, Chinook role.

Every generated statement must be a sentence of the role grammar and run on SQLite; every
record must replay to the same configuration hash and bit-identical mask with the chosen
token inside it; the KV cache must give the logits of a full re-run; tiny budgets must still
end in complete statements (the reserve)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest
import sqlalchemy as sa

from grid_sql.decode import Generation, StepKind, StepRecord, StopReason, generate, mask_digest
from grid_sql.decode.backend import LlamaCppBackend
from grid_sql.decode.loop import pick_token
from grid_sql.errors import BudgetError, TokenizerError
from grid_sql.grammar import Grammar
from grid_sql.mask.guide import Guide
from grid_sql.mask.reserve import reserve_table
from grid_sql.mask.vocab import Vocabulary
from grid_sql.parser.incremental import accepts

from .conftest import QUESTIONS, messages


@pytest.fixture(scope="module")
def backend(smollm2_gguf: Path, smollm2_vocab: Vocabulary) -> Iterator[LlamaCppBackend]:
    b = LlamaCppBackend(str(smollm2_gguf), n_ctx=1024, vocab=smollm2_vocab)
    yield b


@pytest.fixture(scope="module")
def generations(backend: LlamaCppBackend, chinook_guide: Guide) -> list[Generation]:
    return [
        generate(backend, chinook_guide, backend.chat_prompt(messages(q)), max_tokens=40)
        for q in QUESTIONS
    ]


def replay(guide: Guide, gen: Generation) -> None:
    """Recompute every step from the tokens alone; the record must match bit for bit."""
    m = guide.matcher()
    buf = m.allocate_bitmask()
    for i, rec in enumerate(gen.records):
        assert rec.step == i
        assert rec.config_hash == m.config_hash
        n, entry_ids = guide.fill_bitmask(m.config, buf)
        if rec.kind is StepKind.CHECKED or (rec.kind is StepKind.EOS and not rec.mask_digest):
            # the favourite, or the EOS tail, checked: the record names no mask
            assert (rec.entry_ids, rec.mask_digest, rec.allowed, rec.blocked) == ((), "", 0, 0)
        else:
            assert rec.mask_digest == mask_digest(buf)
            assert tuple(entry_ids) == rec.entry_ids
            assert (rec.allowed, rec.blocked) == (n, guide.vocab.size - n)
        assert (int(buf[rec.token >> 5]) >> (rec.token & 31)) & 1, f"step {i} token not in mask"
        if rec.kind is StepKind.FORCED:
            assert n == 1
        m.accept_token(rec.token)
    assert gen.records[-1].kind is StepKind.EOS
    assert m.is_terminated()


def test_backend_vocabulary_is_the_models(backend: LlamaCppBackend) -> None:
    assert backend.vocab.size == backend.llm.n_vocab()
    assert backend.vocab.eos_token_id == backend.llm.token_eos()
    ids = backend.chat_prompt(messages("hi"))
    assert ids and all(0 <= t < backend.vocab.size for t in ids)
    assert backend.vocab.spell(ids).endswith(b"assistant\n")


def test_vocabulary_that_disagrees_with_the_model_is_refused(
    smollm2_gguf: Path, smollm2_vocab: Vocabulary
) -> None:
    short = Vocabulary(
        smollm2_vocab.token_bytes[:-1],
        eos_token_id=smollm2_vocab.eos_token_id,
        special_ids=smollm2_vocab.special_ids - {smollm2_vocab.size - 1},
        warn_incomplete=False,
    )
    with pytest.raises(TokenizerError, match="logits"):
        LlamaCppBackend(str(smollm2_gguf), n_ctx=256, vocab=short)


def test_generated_statements_are_sentences_that_run(
    generations: list[Generation], chinook_guide: Guide, chinook_engine: sa.Engine
) -> None:
    for gen in generations:
        assert gen.stop_reason in (StopReason.EOS, StopReason.STOP_AT_ACCEPT, StopReason.RESERVE)
        assert 0 < len(gen.token_ids) <= 40
        assert accepts(chinook_guide.grammar, gen.text), gen.text
        with chinook_engine.connect() as conn:
            conn.execute(sa.text(gen.sql.rstrip().rstrip(";")))
        t = gen.timings
        assert t.total >= t.prefill + t.model and t.mask > 0


def test_records_replay_bit_identical(generations: list[Generation], chinook_guide: Guide) -> None:
    for gen in generations:
        assert [r.token for r in gen.records[:-1]] == gen.token_ids
        replay(chinook_guide, gen)


def test_check_first_emits_the_tokens_of_the_masked_loop(
    backend: LlamaCppBackend, chinook_guide: Guide, generations: list[Generation]
) -> None:
    """The default loop checks the model's favourite before filling a mask; with every mask
    filled (the paper's normative order, ``check_first=False``) the tokens are the same."""
    checked = 0
    for q, gen in zip(QUESTIONS, generations, strict=True):
        prompt = backend.chat_prompt(messages(q))
        full = generate(backend, chinook_guide, prompt, max_tokens=40, check_first=False)
        assert full.token_ids == gen.token_ids, q
        assert full.stop_reason == gen.stop_reason
        assert StepKind.CHECKED not in {r.kind for r in full.records}
        checked += sum(r.kind is StepKind.CHECKED for r in gen.records)
    assert checked > 0


class _Recording(LlamaCppBackend):
    """The real backend, keeping the logits it last returned (to pair them with the token
    the loop chose from them)."""

    last: np.ndarray

    def prefill(self, prompt_ids: Sequence[int]) -> np.ndarray:
        self.last = super().prefill(prompt_ids).copy()
        return self.last

    def step(self, token_ids: Sequence[int]) -> np.ndarray:
        self.last = super().step(token_ids).copy()
        return self.last


def test_a_checked_token_is_the_masked_argmax(
    smollm2_gguf: Path, smollm2_vocab: Vocabulary, chinook_guide: Guide
) -> None:
    """Exactness of check-first: at every step the model chose (checked or sampled), the
    token is the argmax of its logits over the exact mask, recomputed here."""
    b = _Recording(str(smollm2_gguf), n_ctx=1024, vocab=smollm2_vocab)
    chosen: list[tuple[StepRecord, np.ndarray]] = []

    def keep(rec: StepRecord) -> None:
        if rec.kind in (StepKind.CHECKED, StepKind.SAMPLED):
            chosen.append((rec, b.last))

    for q in QUESTIONS:
        chosen.clear()

        gen = generate(b, chinook_guide, b.chat_prompt(messages(q)), max_tokens=40, on_step=keep)
        m = chinook_guide.matcher()
        buf = m.allocate_bitmask()
        by_step = {rec.step: lg for rec, lg in chosen}
        for rec in gen.records[:-1]:
            if rec.step in by_step:
                chinook_guide.fill_bitmask(m.config, buf)
                pick = pick_token(by_step[rec.step], buf, 0.0, np.random.default_rng(0))
                assert pick == rec.token, (q, rec.step)
            m.accept_token(rec.token)
        assert any(r.kind is StepKind.CHECKED for r, _ in chosen)


def test_kv_reuse_gives_the_logits_of_a_full_rerun(backend: LlamaCppBackend) -> None:
    prompt = backend.chat_prompt(messages("List all albums."))
    logits = backend.prefill(prompt)
    extra: list[int] = []
    for _ in range(3):
        t = int(np.argmax(logits))
        extra.append(t)
        n_before = backend.llm.n_tokens
        logits = backend.step([t])
        assert backend.llm.n_tokens == n_before + 1  # one position evaluated, not a re-run
    incremental = logits.copy()
    backend.reset()
    full = backend.prefill(prompt + extra).copy()
    np.testing.assert_allclose(incremental, full, rtol=0, atol=2e-2)
    assert int(np.argmax(incremental)) == int(np.argmax(full))
    # a second prefill of a shared prefix only evaluates the new suffix
    backend.prefill(prompt)
    assert backend.n_past == len(prompt)


def test_tiny_budgets_still_end_in_complete_statements(
    backend: LlamaCppBackend, chinook_guide: Guide
) -> None:
    table = reserve_table(chinook_guide.grammar, chinook_guide.vocab)
    floor = table.cost(chinook_guide.matcher().config)
    prompt = backend.chat_prompt(messages(QUESTIONS[0]))
    with pytest.raises(BudgetError):
        generate(backend, chinook_guide, prompt, max_tokens=floor - 1)
    for budget in (floor, floor + 1, floor + 3, 9):
        gen = generate(backend, chinook_guide, prompt, max_tokens=budget)
        assert len(gen.token_ids) <= budget
        assert accepts(chinook_guide.grammar, gen.text), (budget, gen.text)
        if gen.stop_reason is StopReason.RESERVE:
            assert (
                any(r.kind is StepKind.RESERVE for r in gen.records)
                or gen.records[-1].kind is StepKind.EOS
            )
        replay(chinook_guide, gen)


def test_seeded_sampling_is_reproducible(backend: LlamaCppBackend, chinook_guide: Guide) -> None:
    prompt = backend.chat_prompt(messages(QUESTIONS[1]))
    seen: list[StepRecord] = []
    a = generate(
        backend, chinook_guide, prompt, max_tokens=16, temperature=0.9, seed=7, on_step=seen.append
    )
    b = generate(backend, chinook_guide, prompt, max_tokens=16, temperature=0.9, seed=7)
    assert a.token_ids == b.token_ids
    assert seen == a.records  # streamed as they happen
    assert accepts(chinook_guide.grammar, a.text)
    replay(chinook_guide, a)
    # sampled choices checked first (draw_unmasked), and with every mask filled
    assert any(r.kind is StepKind.CHECKED for r in a.records)
    full = generate(
        backend, chinook_guide, prompt, max_tokens=16, temperature=0.9, seed=7, check_first=False
    )
    assert StepKind.CHECKED not in {r.kind for r in full.records}
    assert accepts(chinook_guide.grammar, full.text)
    replay(chinook_guide, full)


def test_guide_for_another_vocabulary_is_refused(
    backend: LlamaCppBackend, chinook_guide: Guide
) -> None:
    v = backend.vocab
    relabelled = Vocabulary(  # same spellings, another EOS: a different tokenizer
        v.token_bytes, eos_token_id=0, special_ids=v.special_ids, warn_incomplete=False
    )
    other = Guide(chinook_guide.grammar, relabelled)
    with pytest.raises(TokenizerError, match="another vocabulary"):
        generate(backend, other, [1, 2, 3], max_tokens=8)


def test_forced_span_is_written_without_sampling_and_fed_as_one_batch(
    backend: LlamaCppBackend, smollm2_vocab: Vocabulary, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Bytes 0x01-0x03 occur in exactly one SmolLM2 token each (their single-byte tokens), so
    # the first three masks are singletons: a jump-forward span.
    g = Grammar.from_lark('start: "\\x01\\x02\\x03" WORD\nWORD: /[a-z]+/\n', name="forced")
    guide = Guide(g, smollm2_vocab)
    span = guide.matcher().forced_tokens()
    assert smollm2_vocab.spell(span) == b"\x01\x02\x03"
    calls: list[int] = []
    forward = backend._forward

    def counting(ids: list[int]) -> np.ndarray:
        calls.append(len(ids))
        return forward(ids)

    monkeypatch.setattr(backend, "_forward", counting)
    prompt = backend.chat_prompt(messages("Say a word."))
    gen = generate(backend, guide, prompt, max_tokens=8, check_first=False)
    kinds = [r.kind for r in gen.records]
    assert kinds[: len(span)] == [StepKind.FORCED] * len(span)
    assert gen.token_ids[: len(span)] == span
    assert calls[1] == len(span)  # after the prompt: the whole span in one forward call
    assert accepts(g, gen.text)
    replay(guide, gen)


def test_prompt_logits_do_not_depend_on_the_cached_prefix() -> None:
    """Greedy output must not depend on what the process generated before. llama.cpp's
    logits depend on how a prompt is chunked (a lone re-fed last token takes another kernel
    path than a batch: Qwen2.5-Coder Q4_K_M moved by up to 0.39), so prefill reuses only
    whole ``n_batch`` chunks of a cached prefix. n_batch=64 here so reuse really happens."""
    from grid_sql.decode.models import fetch_model

    path = fetch_model("qwen2.5-coder-0.5b")
    schema = " ".join(f"CREATE TABLE t{i} (a{i} INT, b{i} TEXT);" for i in range(20))
    sys_msg = {"role": "system", "content": "You write SQLite. " + schema}
    p1 = [sys_msg, {"role": "user", "content": "How many rows are in t1?"}]
    p2 = [sys_msg, {"role": "user", "content": "List the b3 values of t3."}]

    def fresh(msgs: list[dict[str, str]]) -> np.ndarray:
        b = LlamaCppBackend(str(path), n_ctx=1024, n_batch=64)
        return b.prefill(b.chat_prompt(msgs)).copy()

    want = fresh(p2)
    b = LlamaCppBackend(str(path), n_ctx=1024, n_batch=64)
    first = b.prefill(b.chat_prompt(p1)).copy()
    b.step([int(first.argmax())])
    ids1, ids2 = b.chat_prompt(p1), b.chat_prompt(p2)
    shared = next(i for i, (x, y) in enumerate(zip(ids1, ids2, strict=False)) if x != y)
    assert shared >= 128  # whole 64-token chunks of the cached prefix are reused
    after_other = b.prefill(ids2).copy()
    again = b.prefill(b.chat_prompt(p2)).copy()  # same prompt: the old code re-fed one token
    assert np.array_equal(after_other, want)
    assert np.array_equal(again, want)
