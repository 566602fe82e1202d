"""Cold masks off the critical path (issue #7 §2, paper §6.3): with ``fill(block=False)`` a
warm row is filled at once, a row whose mask needs a walk goes to the masker's worker and its
request is deferred (never an approximate mask), for at most ``max_defer_rounds`` rounds.

Guides come from registries with a private, empty :class:`MaskCache`, so which masks are cold
does not depend on what other tests warmed. Every filled row is compared with a fresh
single-request matcher's mask; the engine test runs SmolLM2 through the test server.
"""

from __future__ import annotations

import json
import threading
import time
import warnings
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from grid_sql.mask.cache import MaskCache
from grid_sql.mask.guide import Guide
from grid_sql.serve import BatchMasker, GuideRegistry
from grid_sql.serve.client import ServerClient
from grid_sql.serve.server import GridServer

from . import guides as G


def _fresh(role: str) -> Guide:
    """A guide of ``role`` sharing nothing with the registries' caches: the reference."""
    return Guide(G.spec(role).build_grammar(), G.vocab(), cache=MaskCache())


@pytest.fixture()
def reg() -> Iterator[GuideRegistry]:
    """A registry with an empty cache of its own and the two roles' guides built (so a slot
    added below has its matcher at once: what is pending is a mask, not a build)."""
    with GuideRegistry(cache=MaskCache()) as r:
        for role in ("demo", "artists"):
            r.get(G.spec(role), G.vocab())
        yield r


def _hold(bm: BatchMasker) -> threading.Event:
    """Occupy the masker's single worker until the returned event is set."""
    gate = threading.Event()
    bm._worker().submit(gate.wait, 60)
    return gate


def test_a_walked_mask_is_warm_for_every_slot_after(reg: GuideRegistry) -> None:
    """A cold configuration goes to the worker once; its row is the fresh guide's; the same
    configuration on another slot afterwards is filled in the call (the guide memoized it)."""
    v = G.vocab()
    toks = G.tokens(G.SQL["artists"][0])
    ref = G.reference_masks(_fresh("artists"), toks)
    with BatchMasker(v, reg) as bm:
        bm.add(0, G.spec("artists"))
        f = bm.fill([0], block=False)  # the build filled the first mask: warm
        assert f.masked[0] and np.array_equal(f.bitmask[0], ref[0])
        assert bm.stats.offloaded == 0 and bm._pool is None
        bm.accept(0, toks[0])
        bm.accept(0, toks[1])
        gate = _hold(bm)
        f = bm.fill([0], block=False)
        assert f.pending[0] and f.cold is not None and f.cold[0] and not f.bitmask[0].any()
        assert bm.stats.offloaded == 1
        gate.set()
        bm.wait([0], 60)
        f = bm.fill([0], block=False)
        assert f.masked[0] and np.array_equal(f.bitmask[0], ref[2])
        bm.add(1, G.spec("artists"), tokens=toks[:2])
        f = bm.fill([1, 0], block=False)
        assert f.masked.all() and not f.pending.any()
        assert np.array_equal(f.bitmask[0], ref[2]) and np.array_equal(f.bitmask[1], ref[2])
        assert bm.stats.offloaded == 1 and bm.stats.deferred == 1


def test_warm_rows_advance_while_the_cold_row_is_deferred(reg: GuideRegistry) -> None:
    """Slot 0 (warm: its statement was walked before) advances every round; slot 1 (a cold
    guide) is deferred in the round its walk is on the worker and advances once the row is
    there; both rows always equal a fresh guide's masks."""
    v = G.vocab()
    warm_toks = G.tokens(G.SQL["demo"][0])
    cold_toks = G.tokens(G.SQL["artists"][1])
    ref_warm = G.reference_masks(_fresh("demo"), warm_toks)
    ref_cold = G.reference_masks(_fresh("artists"), cold_toks)
    G.reference_masks(reg.get(G.spec("demo"), v), warm_toks)  # slot 0's masks walked once
    with BatchMasker(v, reg, max_defer_rounds=100) as bm:
        bm.add(0, G.spec("demo"))
        bm.add(1, G.spec("artists"))
        bm.accept(1, cold_toks[0])  # its first mask was the build's: now at a cold one
        gate = _hold(bm)
        f = bm.fill([0, 1], block=False)
        assert f.masked[0] and np.array_equal(f.bitmask[0], ref_warm[0])
        assert f.pending[1] and f.cold is not None and f.cold[1] and not f.masked[1]
        assert not f.bitmask[1].any()  # a deferred row is left alone, never approximated
        assert bm.stats.offloaded == 1 and bm.stats.deferred == 1
        bm.accept(0, warm_toks[0])
        gate.set()
        k0, k1, rounds = 1, 1, 0
        while k0 <= len(warm_toks) or k1 <= len(cold_toks):
            live = [s for s, k, n in ((0, k0, warm_toks), (1, k1, cold_toks)) if k <= len(n)]
            f = bm.fill(live, block=False)
            rounds += 1
            assert rounds < 500
            if f.pending.any():
                bm.wait(live, 5.0)  # as the engine does when nothing else can run
            for i, s in enumerate(live):
                toks, ref, k = (warm_toks, ref_warm, k0) if s == 0 else (cold_toks, ref_cold, k1)
                if f.pending[i]:
                    assert s == 1 and not f.masked[i]
                    continue
                assert f.masked[i] and np.array_equal(f.bitmask[i], ref[k]), (s, k)
                if k < len(toks):
                    bm.accept(s, toks[k])
                if s == 0:
                    k0 += 1
                else:
                    k1 += 1
        assert bm.stats.deferred >= 1
        assert bm.stats.offloaded >= 1 and bm.stats.warm >= len(warm_toks)


def test_warm_steady_state_never_touches_the_worker(reg: GuideRegistry) -> None:
    v = G.vocab()
    toks = G.tokens(G.SQL["artists"][0])
    ref = G.reference_masks(_fresh("artists"), toks)
    guide = reg.get(G.spec("artists"), v)
    G.reference_masks(guide, toks)  # walks every mask of the statement once
    with BatchMasker(v, reg) as bm:
        bm.add(0, G.spec("artists"))
        bm.add(1, G.spec("artists"))
        for k in range(len(toks) + 1):
            f = bm.fill([0, 1], block=False)
            assert f.masked.all() and not f.pending.any()
            assert np.array_equal(f.bitmask[0], ref[k]) and np.array_equal(f.bitmask[1], ref[k])
            if k < len(toks):
                bm.accept(0, toks[k])
                bm.accept(1, toks[k])
        assert bm.stats.offloaded == 0 and bm.stats.warm == 2 * (len(toks) + 1)
        assert bm._pool is None


def test_deferral_is_bounded_then_waited(reg: GuideRegistry) -> None:
    v = G.vocab()
    toks = G.tokens(G.SQL["demo"][1])
    ref = G.reference_masks(_fresh("demo"), toks)
    with BatchMasker(v, reg, max_defer_rounds=3) as bm:
        bm.add(0, G.spec("demo"), tokens=toks[:5])
        gate = _hold(bm)
        for _ in range(3):
            f = bm.fill([0], block=False)
            assert f.pending[0] and not f.masked[0]
        assert bm.stats.deferred == 3 and bm.stats.waited == 0
        threading.Timer(0.2, gate.set).start()
        f = bm.fill([0], block=False)  # the 4th round waits for the walk
        assert f.masked[0] and not f.pending[0]
        assert np.array_equal(f.bitmask[0], ref[5])
        assert bm.stats.waited == 1 and bm.stats.deferred == 3


def test_block_and_zero_rounds_fill_cold_masks_in_the_call(reg: GuideRegistry) -> None:
    v = G.vocab()
    toks = G.tokens(G.SQL["artists"][1])
    ref = G.reference_masks(_fresh("artists"), toks)
    for kw, block in (({}, True), ({"max_defer_rounds": 0}, False)):
        with GuideRegistry(cache=MaskCache()) as r, BatchMasker(v, r, **kw) as bm:
            r.get(G.spec("artists"), v)
            bm.add(0, G.spec("artists"), tokens=toks[:4])
            f = bm.fill([0], block=block)
            assert f.masked[0] and np.array_equal(f.bitmask[0], ref[4])
            assert bm.stats.offloaded == 0 and bm._pool is None


def test_a_synced_slot_drops_its_stale_walk(reg: GuideRegistry) -> None:
    v = G.vocab()
    toks = G.tokens(G.SQL["demo"][0])
    ref = G.reference_masks(_fresh("demo"), toks)
    with BatchMasker(v, reg) as bm:
        bm.add(0, G.spec("demo"), tokens=toks[:6])
        gate = _hold(bm)
        assert bm.fill([0], block=False).pending[0]
        bm.sync(0, toks[:3])  # the engine rolled the request back while its walk queued
        gate.set()
        for _ in range(100):
            f = bm.fill([0], block=False)
            if f.masked[0]:
                break
            time.sleep(0.01)
        assert np.array_equal(f.bitmask[0], ref[3])
        assert bm.stats.stale == 1


# ----------------------------------------------------------------------------- the engine

FRESH = {"verbs": ["select"], "tables": {"allow": ["Genre", "MediaType"]}}


def _msgs(tables: str, question: str) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": f"Write one SQLite SELECT statement. Tables: {tables}."},
        {"role": "user", "content": question},
    ]


@pytest.fixture(scope="module")
def server() -> Iterator[GridServer]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # SmolLM2's vocabulary is not byte-complete
        srv = GridServer(
            G.TEST_MODEL,
            max_batch=2,
            n_ctx=1024,
            n_batch=256,
            max_batched_tokens=32,
            registry=GuideRegistry(cache=MaskCache()),
        )
    with srv:
        yield srv


def _xargs(role_or_policy: str | dict[str, Any]) -> dict[str, str]:
    if isinstance(role_or_policy, str):
        spec = G.spec(role_or_policy)
    else:
        from grid_sql.policy import AppPolicy, narrow, sqlite_baseline
        from grid_sql.serve import GuideSpec

        snap = G.snapshot()
        app = AppPolicy.from_mapping(role_or_policy, origin="test_defer")
        spec = GuideSpec.from_parts(narrow(sqlite_baseline(snap), app, snap), snap, G.vocab())
    return {"grid_sql": json.dumps(spec.to_json())}


def _in_masks(ans: dict[str, Any], xargs: dict[str, str]) -> None:
    from grid_sql.serve import GuideSpec

    spec = GuideSpec.from_json(xargs["grid_sql"])
    m = Guide(spec.build_grammar(), G.vocab(), cache=MaskCache()).matcher()
    m.accept_tokens(ans["grid_sql"]["token_ids"])  # TokenRejected: outside the exact mask


def test_server_defers_a_cold_mask_and_greedy_output_is_unchanged(server: GridServer) -> None:
    client = ServerClient(server.url)
    fresh = _xargs(FRESH)
    msgs = _msgs("Genre(GenreId, Name)", "List the genres.")
    first = client.chat(msgs, max_tokens=12, temperature=0, vllm_xargs=fresh)
    assert first["grid_sql"]["cold_deferred_rounds"] >= 1  # a new guide's masks are cold
    _in_masks(first, fresh)
    again = client.chat(msgs, max_tokens=12, temperature=0, vllm_xargs=fresh)
    assert again["grid_sql"]["cold_deferred_rounds"] == 0  # the same configurations: warm
    assert again["grid_sql"]["token_ids"] == first["grid_sql"]["token_ids"]
    assert again["choices"][0]["message"]["content"] == first["choices"][0]["message"]["content"]

    # a warm co-tenant keeps decoding while a cold request is deferred
    warm = _xargs("artists")
    wmsgs = _msgs("Artist(ArtistId, Name), Album(AlbumId, Title)", "List all artists.")
    client.chat(wmsgs, max_tokens=40, temperature=0, vllm_xargs=warm)  # warm its masks
    adv0, cold0 = server.stats.advanced_while_deferred, server.stats.deferred_cold
    out: dict[str, Any] = {"chunks": 0}

    def co_tenant() -> None:
        body = {"messages": wmsgs, "max_tokens": 40, "temperature": 0, "vllm_xargs": warm}
        for _, chunk in client.stream("/chat/completions", body):
            out["chunks"] += 1
            out["last"] = chunk

    t = threading.Thread(target=co_tenant)
    t.start()
    deadline = time.monotonic() + 300
    while out["chunks"] < 2 and t.is_alive() and time.monotonic() < deadline:
        time.sleep(0.01)
    cold = _xargs("demo")
    ans = client.chat(
        _msgs("Track(TrackId, Name)", "Count the tracks."),
        max_tokens=12,
        temperature=0,
        vllm_xargs=cold,
    )
    t.join()
    assert ans["grid_sql"]["cold_deferred_rounds"] >= 1
    assert server.stats.deferred_cold > cold0
    assert server.stats.advanced_while_deferred > adv0
    _in_masks(ans, cold)
    _in_masks(out["last"], warm)
