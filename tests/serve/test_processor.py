"""The vLLM logits processor against the tested vLLM release's own classes (no GPU needed).

The engine here does what vLLM's model runner V2 does around a custom processor, with
vLLM's objects: the processor is built with vLLM's ``LogitsProcRequestState`` over the
runner's per-slot buffers (``all_token_ids``, ``prompt_len``, ``prefill_len``,
``total_len``: plain CPU tensors here, as vLLM 0.34's CPU runner keeps them; 0.33's GPU
request state needs CUDA for its pinned buffers, so :class:`Slots` below fills them as that
runner's ``add_request`` does), called with vLLM's ``SamplingParams`` and ``LogitsContext``,
loaded by vLLM's loader and validator; after each step the sampled token is committed to
``all_token_ids`` and ``total_len`` grows, as the runner does. A request may prefill in
chunks: its rows before the last chunk are sampled and discarded, as in vLLM. Every masked
row must equal the single-request Matcher's mask exactly; unmasked rows must be untouched.
"""

from __future__ import annotations

import random
import threading
import time
import tomllib
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
import torch
from vllm.sampling_params import SamplingParams
from vllm.v1.worker.gpu.sample.logits_processor import (
    LogitsContext,
    LogitsProcessor,
    LogitsProcRequestState,
    build_custom_logits_processors_params_validator,
)
from vllm.v1.worker.gpu.sample.logits_processor.loader import _load_v2_logitsprocs_by_fqcns

from grid_sql.mask.guide import ids_to_bitmask
from grid_sql.policy import AppPolicy, narrow, sqlite_baseline
from grid_sql.serve import GuideRegistry, GuideSpec, grid_args
from grid_sql.serve import vllm as grid_vllm
from grid_sql.serve.vllm import GridLogitsProcessor

from . import guides as G

FQCN = "grid_sql.serve.vllm:GridLogitsProcessor"
PAD = 40  # the model's output layer is wider than the tokenizer (padding rows)


class Slots:
    """The runner's per-slot buffers, filled as vLLM's request state fills them: a free
    list of slots (recycled last-freed first), ``all_token_ids[slot, :prefill_len]`` = prompt
    + partial output, ``total_len`` = ``prefill_len`` at admission."""

    def __init__(self, max_reqs: int, max_len: int) -> None:
        self.all_token_ids = torch.zeros((max_reqs, max_len), dtype=torch.int32)
        self.prompt_len = torch.zeros(max_reqs, dtype=torch.int32)
        self.prefill_len = torch.zeros(max_reqs, dtype=torch.int32)
        self.total_len = torch.zeros(max_reqs, dtype=torch.int32)
        self.computed = np.zeros(max_reqs, dtype=np.int64)  # prefill tokens fed so far
        self.req_id_to_index: dict[str, int] = {}
        self.free_indices = list(range(max_reqs))

    def add_request(self, rid: str, prompt_len: int, tokens: list[int]) -> int:
        slot = self.free_indices.pop()
        self.req_id_to_index[rid] = slot
        self.prompt_len[slot] = prompt_len
        self.prefill_len[slot] = len(tokens)
        self.total_len[slot] = len(tokens)
        self.all_token_ids[slot, : len(tokens)] = torch.tensor(tokens, dtype=torch.int32)
        self.computed[slot] = 0
        return slot

    def remove_request(self, rid: str) -> int:
        slot = self.req_id_to_index.pop(rid)
        self.free_indices.append(slot)
        return slot


class Engine:
    """vLLM's interface objects + our processor, stepped like the V2 model runner."""

    def __init__(self, max_reqs: int = 6, max_len: int = 256, seed: int = 0) -> None:
        self.vocab = G.vocab()
        self.V = self.vocab.size + PAD
        cpu = torch.device("cpu")
        self.states = Slots(max_reqs, max_len)
        s = self.states
        lp = LogitsProcRequestState(
            device=cpu,
            max_num_reqs=max_reqs,
            vocab_size=self.V,
            all_token_ids=s.all_token_ids,
            prompt_len=s.prompt_len,
            prefill_len=s.prefill_len,
            total_len=s.total_len,
        )
        self.proc = GridLogitsProcessor(None, lp)
        self.gen = torch.Generator().manual_seed(seed)

    def add(
        self,
        rid: str,
        prompt: list[int],
        output: Sequence[int] = (),
        extra=None,
        chunked: bool = False,
    ) -> int:
        """Admit a request. ``chunked``: its prefill runs in the chunks :meth:`step` is
        given; otherwise the next step's row is its first sampled one."""
        slot = self.states.add_request(rid, len(prompt), list(prompt) + list(output))
        if not chunked:
            self.states.computed[slot] = int(self.states.prefill_len[slot])
        used = self.proc.add_request(slot, SamplingParams(max_tokens=128, extra_args=extra))
        assert used == (extra is not None)
        return slot

    def remove(self, rid: str) -> int:
        return self.states.remove_request(rid)

    def commit(self, rid: str, token: int) -> None:
        slot = self.states.req_id_to_index[rid]
        t = int(self.states.total_len[slot])
        self.states.all_token_ids[slot, t] = token
        self.states.total_len[slot] = t + 1

    def step(
        self,
        order: list[str],
        drafts: dict[str, list[int]] | None = None,
        chunks: dict[str, int] | None = None,
    ):
        """One apply() over the batch in ``order``; returns (logits before, after) by row
        and the row -> (request, local position) layout. ``chunks[r]``: feed request ``r``
        at most that many prefill tokens this step (chunked prefill: its row's sample is
        discarded until the prefill is complete; :meth:`prefilling` says so)."""
        drafts = drafts or {}
        chunks = chunks or {}
        st = self.states
        slots = [st.req_id_to_index[r] for r in order]
        row_slots, local, input_ids, pos, layout, ub = [], [], [], [], [], []
        for r, s in zip(order, slots, strict=True):
            pre = int(st.prefill_len[s])
            if st.computed[s] < pre:  # prefill (chunk): one logits row, at its last token
                st.computed[s] = min(pre, st.computed[s] + chunks.get(r, pre))
                t = int(st.computed[s])
                chain = [int(st.all_token_ids[s, t - 1])]
            else:
                t = int(st.total_len[s])
                chain = [int(st.all_token_ids[s, t - 1])] + drafts.get(r, [])
            ub.append(t + len(chain) - 1)
            for k, tok in enumerate(chain):
                row_slots.append(s)
                local.append(k)
                input_ids.append(tok)
                pos.append(t - 1 + k)
                layout.append((r, k))
        logits = torch.randn(len(row_slots), self.V, generator=self.gen)
        before = logits.clone()
        ctx = LogitsContext(
            expanded_idx_mapping=torch.tensor(row_slots, dtype=torch.int32),
            idx_mapping=torch.tensor(slots, dtype=torch.int32),
            idx_mapping_np=np.array(slots, dtype=np.int32),
            expanded_local_pos=torch.tensor(local, dtype=torch.int32),
            input_ids=torch.tensor(input_ids, dtype=torch.int32),
            pos=torch.tensor(pos, dtype=torch.int64),
            seq_lens_upper_bound_np=np.array(ub, dtype=np.int32),
        )
        after = self.proc.apply(logits, ctx)
        return before, after, layout

    def prefilling(self, rid: str) -> bool:
        s = self.states.req_id_to_index[rid]
        return bool(self.states.computed[s] < int(self.states.prefill_len[s]))


def allowed_bitmask(row: torch.Tensor, vocab_size: int, n_words: int) -> np.ndarray:
    finite = np.isfinite(row.numpy())
    assert not finite[vocab_size:].any(), "ids past the tokenizer must be blocked"
    return ids_to_bitmask(np.flatnonzero(finite[:vocab_size]), n_words)


@pytest.fixture
def engine(monkeypatch) -> Engine:
    monkeypatch.setenv(grid_vllm.ENV_TOKENIZER, G.gguf_path())
    return Engine()


@pytest.fixture(scope="module")
def refs():
    """Reference guides from the processor's own (process-wide) registry."""
    reg = grid_vllm.shared_registry()
    return {role: reg.get(G.spec(role), G.vocab()) for role in ("demo", "artists")}


def check_row(eng: Engine, before, after, i: int, expect: np.ndarray | None) -> None:
    if expect is None:
        assert torch.equal(before[i], after[i]), "a pass-through row was modified"
        return
    got = allowed_bitmask(after[i], eng.vocab.size, eng.proc.masker.n_words)
    assert np.array_equal(got, expect)
    keep = torch.isfinite(after[i])
    assert torch.equal(after[i][keep], before[i][keep]), "allowed logits must be unchanged"


def test_is_a_vllm_processor_and_loads_by_name() -> None:
    assert issubclass(GridLogitsProcessor, LogitsProcessor)
    assert _load_v2_logitsprocs_by_fqcns([FQCN]) == [GridLogitsProcessor]
    py = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())
    assert py["project"]["entry-points"]["vllm.logits_processors"]["grid_sql"] == FQCN


def test_admission_check_through_vllm_validator() -> None:
    from vllm.exceptions import VLLMValidationError

    validate = build_custom_logits_processors_params_validator([FQCN])
    validate(SamplingParams(max_tokens=8))
    validate(SamplingParams(max_tokens=8, extra_args=grid_args(G.spec("demo"))))
    with pytest.raises(VLLMValidationError, match="guide spec"):
        validate(SamplingParams(max_tokens=8, extra_args={"grid_sql": '{"dialect": "sqlite"}'}))


def test_heterogeneous_batch_reorder_remove_reuse(engine: Engine, refs) -> None:
    eng = engine
    plan = {
        "a": ("demo", G.tokens(G.SQL["demo"][0])),
        "b": ("artists", G.tokens(G.SQL["artists"][0])),
    }
    expect = {r: G.reference_masks(refs[role], toks) for r, (role, toks) in plan.items()}
    eng.add("a", [1, 2, 3], extra=grid_args(G.spec("demo")))
    eng.add("b", [4, 5], extra=grid_args(G.spec("artists"), by_fingerprint=False))
    eng.add("c", [6, 7, 8, 9])  # no grid args: untouched
    done = {r: 0 for r in plan}
    rng = random.Random(1)
    order = ["a", "b", "c"]
    while any(done[r] <= len(plan[r][1]) for r in plan):
        rng.shuffle(order)  # the batch is reordered every step
        live = [r for r in order if r == "c" or done[r] <= len(plan[r][1])]
        before, after, layout = eng.step(live)
        for i, (r, _) in enumerate(layout):
            check_row(eng, before, after, i, None if r == "c" else expect[r][done[r]])
        for i, (r, _) in enumerate(layout):
            if r == "c":
                eng.commit(r, int(torch.argmax(after[i])))
                continue
            toks = plan[r][1]
            tok = toks[done[r]] if done[r] < len(toks) else eng.vocab.eos_token_id
            assert torch.isfinite(after[i][tok])  # EOS only once the statement is complete
            eng.commit(r, tok)
            done[r] += 1
    # "a" leaves; "d" (another guide) takes its recycled slot and starts from scratch
    slot_a = eng.remove("a")
    toks_d = G.tokens(G.SQL["artists"][1])
    assert eng.add("d", [9, 9], extra=grid_args(G.spec("artists"))) == slot_a
    ref_d = G.reference_masks(refs["artists"], toks_d)
    for k in range(4):
        before, after, layout = eng.step(["c", "d"])
        check_row(eng, before, after, 0, None)
        check_row(eng, before, after, 1, ref_d[k])
        eng.commit("c", 11)
        eng.commit("d", toks_d[k])
    # a guided request leaving for a pass-through one: the recycled slot is unmasked
    slot_d = eng.remove("d")
    assert eng.add("e", [1]) == slot_d
    before, after, _ = eng.step(["e", "c"])
    check_row(eng, before, after, 0, None)


def test_preemption_resumes_by_replay(engine: Engine, refs) -> None:
    eng = engine
    toks = G.tokens(G.SQL["demo"][1])
    ref = G.reference_masks(refs["demo"], toks)
    prompt = [5, 6, 7, 8]
    eng.add("p", prompt, extra=grid_args(G.spec("demo")))
    eng.add("q", [1, 2])
    k = 7
    for i in range(k):
        before, after, _ = eng.step(["p", "q"])
        check_row(eng, before, after, 0, ref[i])
        eng.commit("p", toks[i])
        eng.commit("q", 3)
    # preempted: the slot is freed (and taken by another guided request), then the request
    # comes back in another slot with prompt + partial output as its prefill
    eng.remove("p")
    eng.add("x", [1], extra=grid_args(G.spec("artists"), by_fingerprint=True))
    before, after, _ = eng.step(["x"])
    check_row(eng, before, after, 0, G.reference_masks(refs["artists"], [])[0])
    slot = eng.add("p", prompt, output=toks[:k], extra=grid_args(G.spec("demo")), chunked=True)
    assert int(eng.states.prefill_len[slot]) == len(prompt) + k
    # the resumed prefill in two chunks: the first chunk's row is left alone (discarded)
    before, after, _ = eng.step(["q", "p"], chunks={"p": 3})
    check_row(eng, before, after, 1, None)
    assert eng.prefilling("p")
    eng.commit("q", 3)
    for i in range(k, len(toks)):
        before, after, layout = eng.step(["q", "p"])
        check_row(eng, before, after, 1, ref[i])
        eng.commit("p", toks[i])
        eng.commit("q", 3)
    before, after, _ = eng.step(["p"])
    check_row(eng, before, after, 0, ref[len(toks)])
    assert torch.isfinite(after[0][eng.vocab.eos_token_id])


def test_speculative_rows_get_masks_after_their_drafts(engine: Engine, refs) -> None:
    eng = engine
    toks = G.tokens(G.SQL["artists"][1])
    ref = G.reference_masks(refs["artists"], toks)
    eng.add("s", [3, 4], extra=grid_args(G.spec("artists")))
    eng.add("t", [5])
    for i in range(2):
        eng.step(["s"])
        eng.commit("s", toks[i])
    before, after, layout = eng.step(["t", "s"], drafts={"s": toks[2:5], "t": [17]})
    assert layout == [("t", 0), ("t", 1), ("s", 0), ("s", 1), ("s", 2), ("s", 3)]
    check_row(eng, before, after, 0, None)
    check_row(eng, before, after, 1, None)
    for k in range(4):
        check_row(eng, before, after, 2 + k, ref[2 + k])
    # the drafts were not committed: the next step's row is after the 2 committed tokens
    before, after, _ = eng.step(["s"])
    check_row(eng, before, after, 0, ref[2])


def test_unavailable_guide_ends_only_its_request(engine: Engine, refs) -> None:
    eng = engine
    eng.add("u", [1, 2], extra={"grid_sql": "ab" * 32})  # a fingerprint never sent as a spec
    eng.add("g", [1, 2], extra=grid_args(G.spec("demo")))
    before, after, _ = eng.step(["u", "g"])
    eos = eng.vocab.eos_token_id
    assert torch.isfinite(after[0]).sum() == 1 and torch.isfinite(after[0][eos])
    check_row(eng, before, after, 1, G.reference_masks(refs["demo"], [])[0])


def test_token_forced_outside_the_mask_breaks_only_its_request(engine: Engine, refs) -> None:
    """A stage after the processor (vLLM's thinking-budget forcing) may commit a token the
    mask blocked: that request goes EOS-only, the batch goes on."""
    eng = engine
    toks = G.tokens(G.SQL["demo"][0])
    ref = G.reference_masks(refs["demo"], toks)
    eng.add("f", [1], extra=grid_args(G.spec("demo")))
    eng.add("h", [2], extra=grid_args(G.spec("demo")))
    before, after, _ = eng.step(["f", "h"])
    blocked = int(torch.nonzero(~torch.isfinite(after[0][: eng.vocab.size]))[0])
    eng.commit("f", blocked)
    eng.commit("h", toks[0])
    before, after, _ = eng.step(["f", "h"])
    eos = eng.vocab.eos_token_id
    assert torch.isfinite(after[0]).sum() == 1 and torch.isfinite(after[0][eos])
    check_row(eng, before, after, 1, ref[1])


def test_cold_guide_compiles_during_its_prefill_without_holding_the_step(monkeypatch, refs) -> None:
    """A never-seen guide joins a warm batch with a long prompt prefilled in chunks (5 ms of
    simulated forward time a step). Its build is held at its start until the test opens a
    gate (the build itself is the registry's real one), so the build is pending for as long
    as the test says: every step in that time must return — co-tenants' rows exact — within
    a bound taken from this run's own warm steps. A step that waited for the build would
    hang until the gate's 30 s timeout. Then the build lands during the prefill and the
    request's first committed row is its guide's exact initial mask."""
    monkeypatch.setenv(grid_vllm.ENV_TOKENIZER, G.gguf_path())
    snap = G.snapshot()
    app = AppPolicy.from_mapping(
        {"verbs": ["select"], "tables": {"allow": ["Track", "Genre", "MediaType"]}},
        origin="cold guide test",
    )
    cold = GuideSpec.from_parts(narrow(sqlite_baseline(snap), app, snap), snap, G.vocab())
    reg = grid_vllm.shared_registry()
    assert reg.ready(cold.fingerprint) is None
    gate = threading.Event()
    real_compile = GuideRegistry._compile

    def gated_compile(self, spec, vocab):
        if spec.fingerprint == cold.fingerprint:
            gate.wait(30)
        return real_compile(self, spec, vocab)

    monkeypatch.setattr(GuideRegistry, "_compile", gated_compile)
    eng = Engine(max_len=4096)
    plan = {
        "w1": ("demo", G.tokens(G.SQL["demo"][1])),
        "w2": ("artists", G.tokens(G.SQL["artists"][0])),
    }
    expect = {r: G.reference_masks(refs[role], toks) for r, (role, toks) in plan.items()}
    done = dict.fromkeys(plan, 0)

    def decode(extra: list[str]) -> float:
        """One step of the co-tenants (and ``extra``, one prefill token each): seconds."""
        for r, (role, toks) in plan.items():
            if done[r] > len(toks):  # finished: a new request of the same role
                eng.remove(r)
                done[r] = 0
            if r not in eng.states.req_id_to_index:
                eng.add(r, [1, 2], extra=grid_args(G.spec(role)))
        t0 = time.perf_counter()
        before, after, layout = eng.step(list(plan) + extra, chunks=dict.fromkeys(extra, 1))
        took = time.perf_counter() - t0
        for i, (r, _) in enumerate(layout):
            if r in plan:
                check_row(eng, before, after, i, expect[r][done[r]])
                toks = plan[r][1]
                eng.commit(r, toks[done[r]] if done[r] < len(toks) else eng.vocab.eos_token_id)
                done[r] += 1
        time.sleep(0.005)  # the forward pass the build overlaps
        return took

    warm = [decode([]) for _ in range(4)]
    eng.add("cold", list(range(1, 3001)), extra=grid_args(cold, by_fingerprint=False), chunked=True)
    pending = [decode(["cold"]) for _ in range(6)]
    assert reg.ready(cold.fingerprint) is None and eng.prefilling("cold")
    bound = max(10 * max(warm), 0.25)
    assert max(pending) < bound, (pending, warm)
    gate.set()
    while reg.ready(cold.fingerprint) is None:
        assert eng.prefilling("cold"), "the prompt ran out before the build finished"
        decode(["cold"])
    while eng.prefilling("cold"):
        eng.step(["cold"], chunks={"cold": 1000})
    before, after, _ = eng.step(["cold"])
    check_row(eng, before, after, 0, G.reference_masks(reg.ready(cold.fingerprint), [])[0])
