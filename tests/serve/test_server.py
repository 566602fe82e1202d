"""The OpenAI-compatible test server end to end: real HTTP on localhost, SmolLM2-135M through
llama.cpp in one batched context, grid-sql guides resolved from specs sent in ``vllm_xargs``.

What a response's text cannot show is checked on its token ids (the server's non-standard
``grid_sql`` extension): every generated token is replayed through a local matcher of the
same guide, so a token outside the exact mask fails the test.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
import warnings
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa

from grid_sql.data import chinook_path
from grid_sql.errors import GuideSpecError, GuideUnavailable, ServingError, TokenRejected
from grid_sql.mask.guide import Guide
from grid_sql.policy import AppPolicy, narrow, open_sqlite, sqlite_baseline
from grid_sql.schema import introspect
from grid_sql.schema.model import SchemaSnapshot
from grid_sql.serve.client import ServerClient, processor_args
from grid_sql.serve.registry import GuideSpec
from grid_sql.serve.server import GridServer

MODEL = "smollm2-135m"
ARTISTS = {"verbs": ["select"], "tables": {"allow": ["Artist", "Album"]}}
CUSTOMERS = {"verbs": ["select"], "tables": {"allow": ["Customer", "Invoice"]}}
FRESH = {"verbs": ["select"], "tables": {"allow": ["Genre"]}}


def _msgs(tables: str, question: str) -> list[dict[str, str]]:
    return [
        {
            "role": "system",
            "content": f"Write one SQLite SELECT statement. Tables: {tables}. Only SQL.",
        },
        {"role": "user", "content": question},
    ]


@pytest.fixture(scope="module")
def chinook() -> Iterator[SchemaSnapshot]:
    engine: sa.Engine = open_sqlite(chinook_path())
    yield introspect(engine)
    engine.dispose()


@pytest.fixture(scope="module")
def server() -> Iterator[GridServer]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # SmolLM2's vocabulary is not byte-complete
        srv = GridServer(MODEL, max_batch=4, n_ctx=2048, n_batch=512, max_batched_tokens=32)
    with srv:
        yield srv


def _spec(snap: SchemaSnapshot, policy: dict[str, Any], vocab: str) -> GuideSpec:
    pol = narrow(sqlite_baseline(snap), AppPolicy.from_mapping(policy, origin="test"), snap)
    return GuideSpec.from_parts(pol, snap, vocab)


def _xargs(spec: GuideSpec) -> dict[str, str]:
    return {"grid_sql": json.dumps(spec.to_json())}


def _post(url: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    req = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(req, timeout=600) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def _replay(guide: Guide, answer: dict[str, Any]) -> None:
    """Every generated token was in its step's exact mask; a 'stop' ends at ACCEPT."""
    m = guide.matcher()
    ids = answer["grid_sql"]["token_ids"]
    assert ids, "nothing was generated"
    m.accept_tokens(ids)  # TokenRejected on a token outside the mask
    if answer["choices"][0]["finish_reason"] == "stop":
        assert m.is_accepting()


def test_models_lists_the_model_and_its_tokenizer(server: GridServer) -> None:
    client = ServerClient(server.url)
    assert client.models() == [server.model_name]
    card = client._json("GET", "/models")["data"][0]
    assert card["grid_sql"]["vocabulary"] == server.backend.vocab.fingerprint


def test_masked_chat_stays_in_the_role_language(
    server: GridServer, chinook: SchemaSnapshot
) -> None:
    vocab = server.backend.vocab
    spec = _spec(chinook, ARTISTS, vocab.fingerprint)
    msgs = _msgs("Artist(ArtistId, Name), Album(AlbumId, Title, ArtistId)", "List all artists.")
    client = ServerClient(server.url)
    masked = client.chat(msgs, max_tokens=24, temperature=0, vllm_xargs=_xargs(spec))
    free = client.chat(msgs, max_tokens=24, temperature=0)
    assert masked["grid_sql"]["mode"] == "grid-processor"
    assert masked["grid_sql"]["fingerprint"] == spec.fingerprint
    assert free["grid_sql"]["mode"] == "unconstrained"
    guide = Guide(spec.build_grammar(), vocab)
    _replay(guide, masked)
    text = masked["choices"][0]["message"]["content"]
    assert text.lstrip().upper().startswith("SELECT")
    # the same greedy request without the mask leaves the language (SmolLM2 explains in prose),
    # so the masks above did the work
    with pytest.raises(TokenRejected):
        _replay(guide, free)


def test_heterogeneous_guides_in_one_batch(server: GridServer, chinook: SchemaSnapshot) -> None:
    vocab = server.backend.vocab
    specs = [_spec(chinook, p, vocab.fingerprint) for p in (ARTISTS, CUSTOMERS)]
    jobs = [
        (specs[0], _msgs("Artist(ArtistId, Name)", "How many artists are there?")),
        (specs[1], _msgs("Customer(CustomerId, Country)", "List the customers' countries.")),
        (specs[0], _msgs("Album(AlbumId, Title)", "Show the album titles.")),
        (None, _msgs("Customer(CustomerId, Country)", "How many customers?")),
    ]
    answers: list[dict[str, Any]] = [{} for _ in jobs]
    rounds0 = server.stats.rounds

    def run(i: int) -> None:
        spec, msgs = jobs[i]
        extra = {"vllm_xargs": _xargs(spec)} if spec is not None else {}
        answers[i] = ServerClient(server.url).chat(msgs, max_tokens=20, temperature=0, **extra)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(jobs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # four requests of up to 20 tokens shared rounds: fewer rounds than run one after another
    assert server.stats.rounds - rounds0 < sum(len(a["grid_sql"]["token_ids"]) + 1 for a in answers)
    guides = {s.fingerprint: Guide(s.build_grammar(), vocab) for s in specs}
    for (spec, _), ans in zip(jobs, answers, strict=True):
        if spec is None:
            assert ans["grid_sql"]["mode"] == "unconstrained"
            continue
        assert ans["grid_sql"]["fingerprint"] == spec.fingerprint
        _replay(guides[spec.fingerprint], ans)
    # the other role's tables are outside each language: the guides really differ
    named = [
        a
        for a in (answers[0], answers[2])
        if "FROM" in a["choices"][0]["message"]["content"].upper()
    ]
    assert named, "no Artist/Album statement reached its FROM clause in 20 tokens"
    with pytest.raises(TokenRejected):
        guides[specs[1].fingerprint].matcher().accept_tokens(named[0]["grid_sql"]["token_ids"])


def test_stream_matches_the_plain_answer(server: GridServer, chinook: SchemaSnapshot) -> None:
    spec = _spec(chinook, ARTISTS, server.backend.vocab.fingerprint)
    msgs = _msgs("Artist(ArtistId, Name)", "Name one artist.")
    client = ServerClient(server.url)
    plain = client.chat(msgs, max_tokens=12, temperature=0, vllm_xargs=_xargs(spec))
    body = {"messages": msgs, "max_tokens": 12, "temperature": 0, "vllm_xargs": _xargs(spec)}
    chunks = [c for _, c in client.stream("/chat/completions", body)]
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks)
    assert text == plain["choices"][0]["message"]["content"]
    assert chunks[-1]["choices"][0]["finish_reason"] == plain["choices"][0]["finish_reason"]
    assert chunks[-1]["grid_sql"]["token_ids"] == plain["grid_sql"]["token_ids"]


def test_fingerprint_after_spec_and_fresh_guide_is_deferred_not_approximated(
    server: GridServer, chinook: SchemaSnapshot
) -> None:
    vocab = server.backend.vocab
    warm = _spec(chinook, ARTISTS, vocab.fingerprint)
    client = ServerClient(server.url)
    # a fingerprint alone works once the server has seen the spec
    msgs = _msgs("Artist(ArtistId, Name)", "How many artists?")
    by_fp = client.chat(
        msgs, max_tokens=8, temperature=0, vllm_xargs={"grid_sql": warm.fingerprint}
    )
    assert by_fp["grid_sql"]["fingerprint"] == warm.fingerprint
    # A never-seen guide joins a running request while the registry's build worker is busy
    # (held by the test): the fresh request is deferred round after round, its co-tenant keeps
    # decoding, and once the build lands the fresh request gets exact masks from its first token.
    fresh = _spec(chinook, FRESH, vocab.fingerprint)
    gate = threading.Event()
    server.registry._pool.submit(gate.wait)  # the single build worker is occupied
    co: dict[str, Any] = {"chunks": 0}
    body = {"messages": msgs, "max_tokens": 64, "temperature": 0, "vllm_xargs": _xargs(warm)}

    def co_tenant() -> None:
        for _, chunk in client.stream("/chat/completions", body):
            co["chunks"] += 1
            co["last"] = chunk

    def fresh_request() -> None:
        co["fresh"] = client.chat(
            _msgs("Genre(GenreId, Name)", "List the genres."),
            max_tokens=8,
            temperature=0,
            vllm_xargs=_xargs(fresh),
        )

    deferred0 = server.stats.deferred
    t1 = threading.Thread(target=co_tenant)
    t1.start()
    _until(lambda: co["chunks"] >= 1, "the co-tenant never streamed")
    t2 = threading.Thread(target=fresh_request)
    t2.start()
    try:
        _until(lambda: server.stats.deferred > deferred0, "the fresh request was never deferred")
        seen = co["chunks"]
        _until(
            lambda: co["chunks"] >= seen + 2 or not t1.is_alive(),
            "the co-tenant stalled while the fresh request waited",
        )
    finally:
        gate.set()
    t1.join()
    t2.join()
    ans = co["fresh"]
    assert ans["grid_sql"]["deferred_rounds"] >= 1
    assert co["chunks"] > seen or co["last"]["choices"][0]["finish_reason"]
    _replay(Guide(fresh.build_grammar(), vocab), ans)
    _replay(Guide(warm.build_grammar(), vocab), co["last"])


def _until(cond: Any, what: str, timeout: float = 600.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(what)
        time.sleep(0.01)


def test_bad_requests_raise_typed_errors(server: GridServer, chinook: SchemaSnapshot) -> None:
    client = ServerClient(server.url)
    msgs = _msgs("Artist(ArtistId, Name)", "How many artists?")
    with pytest.raises(GuideSpecError):
        client.chat(msgs, max_tokens=4, vllm_xargs={"grid_sql": '{"dialect": "sqlite"'})
    with pytest.raises(GuideSpecError):
        client.chat(msgs, max_tokens=4, vllm_xargs={"grid_sql": '{"dialect": "cobol"}'})
    with pytest.raises(GuideUnavailable, match="no guide spec"):
        client.chat(msgs, max_tokens=4, vllm_xargs={"grid_sql": "ab" * 32})
    other = _spec(chinook, ARTISTS, "0" * 64)  # compiled for another tokenizer
    with pytest.raises(GuideUnavailable, match="tokenizer"):
        client.chat(msgs, max_tokens=4, vllm_xargs=_xargs(other))
    with pytest.raises(ServingError, match="string or a number"):
        client.chat(msgs, max_tokens=4, vllm_xargs={"grid_sql": {"nested": 1}})
    with pytest.raises(ServingError, match="structured_outputs"):
        client.chat(msgs, max_tokens=4, structured_outputs={"grammar": 'root ::= "x"'})
    with pytest.raises(ServingError, match="max_tokens"):
        client.chat(msgs, max_tokens=0)
    status, body = _post(server.url + "/chat/completions", {"messages": msgs, "n": 2})
    assert status == 400 and "n must be 1" in body["error"]["message"]
    status, body = _post(server.url + "/completions", {"prompt": "", "model": "nope"})
    assert status == 404
    with pytest.raises(ServingError, match="cannot reach"):
        ServerClient("http://127.0.0.1:9/v1", timeout_s=5).models()


def test_plain_completions_endpoint(server: GridServer, chinook: SchemaSnapshot) -> None:
    spec = _spec(chinook, ARTISTS, server.backend.vocab.fingerprint)
    client = ServerClient(server.url)
    ans = client.complete("-- all artists\n", max_tokens=10, temperature=0, vllm_xargs=_xargs(spec))
    assert ans["object"] == "text_completion"
    _replay(Guide(spec.build_grammar(), server.backend.vocab), ans)


def test_processor_args_travel_as_a_json_string(chinook: SchemaSnapshot) -> None:
    pol = narrow(sqlite_baseline(chinook), AppPolicy.from_mapping(ARTISTS, origin="t"), chinook)
    xargs, fp = processor_args(chinook, pol, "f" * 64)
    assert set(xargs) == {"grid_sql"} and isinstance(xargs["grid_sql"], str)
    assert GuideSpec.from_json(xargs["grid_sql"]).fingerprint == fp


def test_cli_serve_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    from grid_sql.cli import main

    with pytest.raises(SystemExit) as info:
        main(["serve", "--help"])
    assert info.value.code == 0
    assert "grid-sql serve" in capsys.readouterr().out
    assert main(["serve", "--model", "/nonexistent/model.gguf"]) == 2
