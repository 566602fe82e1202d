"""SmolLM2-135M through transformers + torch: the same loop, KV-cache reuse, and processor mode
(``model.generate`` with :class:`GridLogitsProcessor`: EOS only at ACCEPT, a stop by
``max_new_tokens`` recorded as TRUNCATED)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from grid_sql.decode import GridLogitsProcessor, StepKind, StopReason, generate, mask_digest
from grid_sql.decode.backend import TransformersBackend
from grid_sql.decode.loop import Generation
from grid_sql.mask.guide import Guide
from grid_sql.mask.vocab import Vocabulary
from grid_sql.parser.incremental import accepts, is_viable_prefix

from .conftest import QUESTIONS, messages


@pytest.fixture(scope="module")
def backend(smollm2_gguf: Path, smollm2_vocab: Vocabulary) -> Iterator[TransformersBackend]:
    yield TransformersBackend(str(smollm2_gguf), vocab=smollm2_vocab)


def _replay_records(guide: Guide, gen: Generation) -> None:
    m = guide.matcher()
    buf = m.allocate_bitmask()
    for rec in gen.records:
        assert rec.config_hash == m.config_hash
        n, _ = guide.fill_bitmask(m.config, buf)
        if rec.kind is StepKind.CHECKED or (rec.kind is StepKind.EOS and not rec.mask_digest):
            assert (rec.entry_ids, rec.mask_digest, rec.allowed) == ((), "", 0)  # no mask
        else:
            assert rec.mask_digest == mask_digest(buf) and rec.allowed == n
        assert (int(buf[rec.token >> 5]) >> (rec.token & 31)) & 1
        m.accept_token(rec.token)


def test_vocabulary_agrees_with_the_model(backend: TransformersBackend) -> None:
    assert backend.vocab.size == backend.model.get_output_embeddings().weight.shape[0]
    assert backend.tokenizer.eos_token_id == backend.vocab.eos_token_id
    prompt = backend.chat_prompt(messages("hi"))
    assert backend.vocab.spell(prompt).endswith(b"assistant\n")


def test_hf_tokenizer_vocabulary_equals_the_gguf_one(
    backend: TransformersBackend, smollm2_vocab: Vocabulary
) -> None:
    """What a Hugging Face model directory would use: same ids, spellings, EOS, specials."""
    n = backend.model.get_output_embeddings().weight.shape[0]
    hf = Vocabulary.from_hf(backend.tokenizer, vocab_size=n, warn_incomplete=False)
    assert hf.fingerprint == smollm2_vocab.fingerprint


def test_kv_reuse_gives_the_logits_of_a_full_rerun(backend: TransformersBackend) -> None:
    prompt = backend.chat_prompt(messages("List all albums."))
    logits = backend.prefill(prompt)
    extra = []
    for _ in range(3):
        extra.append(int(np.argmax(logits)))
        logits = backend.step(extra[-1:])
    incremental = logits.copy()
    assert backend.n_past == len(prompt) + 3
    backend.reset()
    full = backend.prefill(prompt + extra).copy()
    np.testing.assert_allclose(incremental, full, rtol=0, atol=1e-3)


def test_loop_generates_a_sentence(backend: TransformersBackend, chinook_guide: Guide) -> None:
    gen = generate(
        backend, chinook_guide, backend.chat_prompt(messages(QUESTIONS[0])), max_tokens=12
    )
    assert accepts(chinook_guide.grammar, gen.text), gen.text
    assert gen.stop_reason is not StopReason.TRUNCATED and gen.mode == 1
    assert gen.records[-1].kind is StepKind.EOS
    _replay_records(chinook_guide, gen)


def test_processor_mode_truncation_and_eos(
    backend: TransformersBackend, chinook_guide: Guide
) -> None:
    import torch
    from transformers import LogitsProcessorList

    prompt = backend.chat_prompt(messages(QUESTIONS[0]))
    x = torch.tensor([prompt])
    eos = chinook_guide.eos_id
    results = {}
    for limit in (3, 24):
        proc = GridLogitsProcessor(chinook_guide)
        out = backend.model.generate(
            x,
            attention_mask=torch.ones_like(x),
            logits_processor=LogitsProcessorList([proc]),
            max_new_tokens=limit,
            do_sample=False,
            eos_token_id=eos,
            pad_token_id=eos,
        )
        (gen,) = proc.finish(out)
        assert gen.mode == 2
        _replay_records(chinook_guide, gen)
        assert is_viable_prefix(chinook_guide.grammar, gen.text)
        if gen.stop_reason is StopReason.EOS:
            assert gen.records[-1].kind is StepKind.EOS
            assert accepts(chinook_guide.grammar, gen.text)  # EOS only at ACCEPT
        else:
            assert gen.stop_reason is StopReason.TRUNCATED
            assert len(gen.token_ids) == limit
        results[limit] = gen
    # 3 tokens cannot hold the statement SmolLM2 writes for this question; 24 can
    assert results[3].stop_reason is StopReason.TRUNCATED
    assert results[24].stop_reason is StopReason.EOS, results[24].text
