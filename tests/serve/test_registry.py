"""GuideSpec wire format, GuideRegistry single flight / LRU / failures, the on-disk store.

Everything is real: Chinook's catalogue, grants-derived policies, SmolLM2's vocabulary, guides
compiled by the registry's worker threads.
"""

from __future__ import annotations

import json
import threading

import numpy as np
import pytest

from grid_sql.errors import EmptyLanguageError, GuideSpecError, GuideUnavailable
from grid_sql.mask.guide import Guide
from grid_sql.serve import GuideRegistry, GuideSpec, GuideStore, grid_args, parse_grid_args

from . import guides as G


# ------------------------------------------------------------------------------ GuideSpec
def test_spec_round_trip_and_wire_forms() -> None:
    s = G.spec("demo")
    again = GuideSpec.from_json(json.dumps(s.to_json()))
    assert again.fingerprint == s.fingerprint
    assert again.policy_obj == G.policy("demo") and again.snapshot == G.snapshot()
    full = grid_args(s)
    assert set(full) == {"grid_sql"} and isinstance(full["grid_sql"], str)
    parsed = parse_grid_args(full)
    assert isinstance(parsed, GuideSpec) and parsed.fingerprint == s.fingerprint
    assert parse_grid_args(grid_args(s, by_fingerprint=True)) == s.fingerprint
    assert parse_grid_args({"grid_sql": s.to_json()}).fingerprint == s.fingerprint
    assert parse_grid_args(None) is None and parse_grid_args({"other": 1}) is None


def test_fingerprint_covers_policy_schema_and_tokenizer() -> None:
    a, b = G.spec("demo"), G.spec("artists")
    assert a.fingerprint != b.fingerprint
    other_vocab = GuideSpec.from_parts(G.policy("demo"), G.snapshot(), "0" * 64)
    assert other_vocab.fingerprint != a.fingerprint
    # key order and whitespace do not matter: the content does
    shuffled = json.loads(json.dumps(a.to_json(), sort_keys=False))
    shuffled["policy"] = dict(reversed(list(shuffled["policy"].items())))
    assert GuideSpec.from_json(json.dumps(shuffled, indent=2)).fingerprint == a.fingerprint


@pytest.mark.parametrize(
    "edit, match",
    [
        (lambda d: d.update(version=2), "version"),
        (lambda d: d.update(extra=1), "unknown"),
        (lambda d: d.pop("schema"), "missing"),
        (lambda d: d.update(vocabulary="xyz"), "vocabulary"),
        (lambda d: d.update(dialect="oracle"), "unknown SQL dialect"),
        (lambda d: d.update(dialect="postgresql"), "dialect"),
        (lambda d: d["policy"].update(surprise=True), "Policy.to_dict"),
        (lambda d: d["policy"].pop("tables"), "malformed"),
        (lambda d: d["schema"].update(dialect="mysql"), "dialect"),
    ],
)
def test_bad_specs_are_typed_errors(edit, match) -> None:
    d = G.spec("demo").to_json()
    edit(d)
    with pytest.raises(GuideSpecError, match=match) as ei:
        GuideSpec.from_json(d)
    assert isinstance(ei.value, ValueError)  # vLLM's admission check catches ValueError


def test_bad_wire_values() -> None:
    with pytest.raises(GuideSpecError, match="not JSON"):
        parse_grid_args({"grid_sql": "{not json"})
    with pytest.raises(GuideSpecError, match="fingerprint"):
        parse_grid_args({"grid_sql": 7})
    with pytest.raises(GuideSpecError, match="JSON object"):
        GuideSpec.from_json("[1, 2]")


# ------------------------------------------------------------------------------ registry
def _masks_equal(g1: Guide, g2: Guide, toks: list[int]) -> bool:
    return all(
        np.array_equal(a, b)
        for a, b in zip(G.reference_masks(g1, toks), G.reference_masks(g2, toks), strict=True)
    )


def test_single_flight_threads_share_one_build() -> None:
    vocab = G.vocab()
    with GuideRegistry() as reg:
        n = 8
        barrier = threading.Barrier(n)
        got: list[Guide] = []
        lock = threading.Lock()

        def worker() -> None:
            barrier.wait()
            g = reg.get(G.spec("artists"), vocab)
            with lock:
                got.append(g)

        ts = [threading.Thread(target=worker) for _ in range(n)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        assert len(got) == n and all(g is got[0] for g in got)
        assert reg.stats.builds == 1 and reg.stats.failures == 0
        assert reg.stats.joined + reg.stats.hits == n - 1
        assert reg.ready(G.spec("artists").fingerprint) is got[0]
        # the compiled guide is the role grammar's: its masks match a direct compile
        direct = Guide(G.spec("artists").build_grammar(), vocab)
        assert got[0].grammar.fingerprint == direct.grammar.fingerprint
        assert _masks_equal(got[0], direct, G.tokens(G.SQL["artists"][1]))


def test_failed_build_is_shared_and_cached_briefly() -> None:
    vocab = G.vocab()
    bad = G.spec("nothing")  # a role with no readable table: empty language
    with GuideRegistry(failure_ttl=60.0) as reg:
        n = 6
        barrier = threading.Barrier(n)
        errs: list[BaseException] = []
        lock = threading.Lock()

        def worker() -> None:
            barrier.wait()
            try:
                reg.get(bad, vocab)
            except GuideUnavailable as e:
                with lock:
                    errs.append(e)

        ts = [threading.Thread(target=worker) for _ in range(n)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        assert len(errs) == n and all(e is errs[0] for e in errs)
        assert isinstance(errs[0].__cause__, EmptyLanguageError)
        assert reg.stats.failures == 1
        with pytest.raises(GuideUnavailable) as again:
            reg.get(bad.fingerprint, vocab)
        assert again.value is errs[0] and reg.stats.failures == 1  # cached, not rebuilt
    with GuideRegistry(failure_ttl=0.0) as reg:
        for _ in range(2):
            with pytest.raises(GuideUnavailable):
                reg.get(bad, vocab)
        assert reg.stats.failures == 2  # expired at once: each request retries


def test_refusals_before_any_build() -> None:
    vocab = G.vocab()
    with GuideRegistry() as reg:
        with pytest.raises(GuideUnavailable, match="send the spec"):
            reg.submit(G.spec("demo").fingerprint, vocab)
        foreign = GuideSpec.from_parts(G.policy("demo"), G.snapshot(), "ab" * 32)
        with pytest.raises(GuideUnavailable, match="tokenizer"):
            reg.submit(foreign, vocab)
        assert reg.stats.builds == 0 and reg.stats.failures == 0


def test_lru_bound() -> None:
    vocab = G.vocab()
    with GuideRegistry(capacity=1) as reg:
        a = reg.get(G.spec("demo"), vocab)
        reg.get(G.spec("artists"), vocab)
        assert reg.stats.evictions == 1
        assert reg.ready(G.spec("demo").fingerprint) is None
        assert reg.ready(G.spec("artists").fingerprint) is not None
        # the spec is still known: a fingerprint-only request rebuilds it
        b = reg.get(G.spec("demo").fingerprint, vocab)
        assert b is not a and b.grammar.fingerprint == a.grammar.fingerprint


# ------------------------------------------------------------------------------ store
def test_store_reload_instead_of_rebuild(tmp_path) -> None:
    vocab = G.vocab()
    s = G.spec("artists")
    with GuideRegistry(store=tmp_path) as reg:
        built = reg.get(s, vocab)
        assert (reg.stats.builds, reg.stats.loads) == (1, 0)
    path = GuideStore(tmp_path).path(s.fingerprint)
    assert path.is_file() and path.parent.parent.name == "v1"
    with GuideRegistry(store=tmp_path) as reg:
        # a restarted server knows the spec from the store: the fingerprint alone suffices
        loaded = reg.get(s.fingerprint, vocab)
        assert (reg.stats.builds, reg.stats.loads) == (0, 1)
    assert loaded.grammar.fingerprint == built.grammar.fingerprint
    assert _masks_equal(loaded, built, G.tokens(G.SQL["artists"][0]))


def test_store_refusing_writes_does_not_fail_the_build(tmp_path) -> None:
    """The registry writes through the one on-disk store: a disk that refuses the entry (here
    the store directory is a file) costs a later start a rebuild, never this request."""
    blocker = tmp_path / "store"
    blocker.write_bytes(b"not a directory")
    vocab = G.vocab()
    s = G.spec("artists")
    with GuideRegistry(store=blocker) as reg:
        guide = reg.get(s, vocab)
        assert (reg.stats.builds, reg.stats.write_failures, reg.stats.failures) == (1, 1, 0)
    assert _masks_equal(guide, guide, G.tokens(G.SQL["artists"][0]))
    assert blocker.read_bytes() == b"not a directory"


@pytest.mark.parametrize("damage", ["garbage", "payload", "stale"])
def test_store_corrupt_entry_rebuilt(tmp_path, damage) -> None:
    vocab = G.vocab()
    s = G.spec("artists")
    with GuideRegistry(store=tmp_path) as reg:
        reg.get(s, vocab)
    path = GuideStore(tmp_path).path(s.fingerprint)
    if damage == "garbage":
        path.write_bytes(b"\x00not json")
    else:
        doc = json.loads(path.read_text())
        if damage == "payload":  # a bit flip inside the grammar, checksum left as it was
            doc["body"]["payload"] = doc["body"]["payload"][:-8] + "AAAAAAA="
        else:  # derived with another dialect grammar, checksum recomputed
            import hashlib

            doc["body"]["l1"] = "0" * 64
            body = json.dumps(doc["body"], sort_keys=True, separators=(",", ":"))
            doc["sha256"] = hashlib.sha256(body.encode()).hexdigest()
        path.write_text(json.dumps(doc))
    with GuideRegistry(store=tmp_path) as reg:
        # garbage: the spec cannot be read back, so send the spec itself
        g = reg.get(s, vocab)
        assert reg.stats.rebuilt_corrupt == 1 and reg.stats.builds == 1
        assert g.grammar.fingerprint == s.build_grammar().fingerprint
    with GuideRegistry(store=tmp_path) as reg:  # rewritten: a clean reload now
        reg.get(s.fingerprint, vocab)
        assert (reg.stats.loads, reg.stats.builds, reg.stats.rebuilt_corrupt) == (1, 0, 0)
