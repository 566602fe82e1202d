"""The serving client: a RemoteAsker asking Chinook through the OpenAI-compatible test server.

grid-processor mode runs end to end (spec in ``vllm_xargs``, grid-sql's masks on the server,
the post-parse checker and safe execution here). A server *without* the processor ignores
``vllm_xargs`` silently, like vLLM: the client's parse gate must refuse what comes back. The
server-grammar fallback is checked on the request it builds (the test server does not
emulate vLLM's structured-output backends) and on the server's refusal being typed.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from grid_sql.data import chinook_path
from grid_sql.errors import OptionError, ServingError, StatementError
from grid_sql.grammar import Grammar
from grid_sql.serve.client import RemoteAsker, RemoteAskResult, ServerClient, grammar_request
from grid_sql.serve.server import GridServer

POLICY = {"verbs": ["select"], "tables": {"allow": ["Artist"]}}


@pytest.fixture(scope="module")
def server() -> Iterator[GridServer]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        srv = GridServer("smollm2-135m", max_batch=2, n_ctx=2048, n_batch=512)
    with srv:
        yield srv


@pytest.fixture(scope="module")
def bare_server() -> Iterator[GridServer]:
    """The same model served without grid-sql's processor."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        srv = GridServer("smollm2-135m", max_batch=1, n_ctx=1024, n_batch=512, processor=False)
    with srv:
        yield srv


def test_remote_asker_grid_processor_end_to_end(server: GridServer) -> None:
    asker = RemoteAsker(chinook_path(), server.url, policy=POLICY, max_tokens=32)
    assert asker.vocabulary == server.backend.vocab.fingerprint  # read from /v1/models
    res = asker.ask("How many artists are there?")
    assert isinstance(res, RemoteAskResult)
    assert res.mode == "grid-processor"
    assert res.sql.upper().startswith("SELECT") and "ARTIST" in res.sql.upper()
    assert res.rows and res.columns
    assert asker.last is not None and asker.last.fingerprint
    assert asker.last.raw["grid_sql"]["fingerprint"] == asker.last.fingerprint
    # the second request names the guide by its fingerprint alone
    builds = server.registry.stats.builds
    again = asker.generate_sql("How many artists are there?")
    assert again.sql == res.sql and again.mode == "grid-processor"
    assert server.registry.stats.builds == builds


def test_remote_generation_is_replayed_into_a_verifiable_audit_record(
    server: GridServer, tmp_path: Path
) -> None:
    from grid_sql.audit.store import AuditStore
    from grid_sql.audit.verify import verify

    store = AuditStore(tmp_path / "audit.sqlite")
    asker = RemoteAsker(
        chinook_path(),
        server.url,
        policy=POLICY,
        max_tokens=32,
        audit=store,
        vocabulary=server.backend.vocab,
    )
    gen = asker.generate_sql("How many artists are there?")
    assert gen.audit_id is not None and gen.mode == "grid-processor"
    rec = store.get(gen.audit_id)
    assert rec.seal["mode"] == "processor"
    assert rec.seal["flags"] == ["remote-replay", "remote:grid-processor"]
    assert asker.last is not None
    ids = asker.last.raw["choices"][0]["token_ids"]  # vLLM's return_token_ids field
    assert [s.token for s in rec.steps] == ids == asker.last.raw["grid_sql"]["token_ids"]
    assert rec.seal["final_sql"] == gen.sql
    report = verify(store, gen.audit_id)
    assert report.ok, report.describe()
    # without the served model's vocabulary there is nothing to replay against
    with pytest.raises(OptionError, match="vocabulary"):
        RemoteAsker(chinook_path(), server.url, policy=POLICY, audit=store)


def test_without_the_processor_the_parse_gate_refuses(bare_server: GridServer) -> None:
    asker = RemoteAsker(chinook_path(), bare_server.url, policy=POLICY, max_tokens=24, repair=False)
    with pytest.raises(StatementError, match="grid-processor mode") as info:
        asker.ask("How many artists are there?")
    assert info.value.mode == "grid-processor"  # type: ignore[attr-defined]
    assert asker.last is not None and asker.last.raw["grid_sql"]["mode"] == "unconstrained"


def test_server_grammar_fallback_request() -> None:
    g = Grammar.dialect("sqlite")
    fields, adaptations = grammar_request(g, "xgrammar")
    assert set(fields) == {"structured_outputs"}
    assert set(fields["structured_outputs"]) == {"grammar"}  # never guided_grammar
    assert "::=" in fields["structured_outputs"]["grammar"]
    lark, _ = grammar_request(g, "guidance")
    assert "::=" not in lark["structured_outputs"]["grammar"]
    assert isinstance(adaptations, tuple)
    json.dumps(fields)  # travels as JSON


def test_server_grammar_mode_is_sent_and_refused_typed(server: GridServer) -> None:
    asker = RemoteAsker(
        chinook_path(), server.url, policy=POLICY, mode="server-grammar", max_tokens=16
    )
    # the test server stands in for vLLM *with* the processor and refuses the fallback field
    with pytest.raises(ServingError, match="structured_outputs"):
        asker.generate_sql("How many artists are there?")


def test_options_are_checked(server: GridServer) -> None:
    with pytest.raises(OptionError):
        RemoteAsker(chinook_path(), server.url, policy=POLICY, mode="local")  # type: ignore[arg-type]
    with pytest.raises(OptionError):
        ServerClient("ftp://x")


def test_remote_autofix_is_sealed_with_its_edits_and_verified(
    server: GridServer, tmp_path: Path
) -> None:
    """A remote generation fixed by autofix is sealed like a local one: the replayed tokens
    spell the generated SQL, the seal carries the edits and the fixed final SQL, and
    ``audit verify`` re-derives the fix (tests/ask/test_autofix_ask.py, locally)."""
    import sqlite3

    from grid_sql.ask.prompt import Example
    from grid_sql.audit.store import AuditStore
    from grid_sql.audit.verify import verify
    from tests.ask.conftest import MUSIC as SCHEMA
    from tests.ask.test_autofix_ask import QUESTION, WRONG

    db = tmp_path / "music.sqlite"
    con = sqlite3.connect(db)
    con.executescript(SCHEMA)
    con.commit()
    con.close()
    store = AuditStore(tmp_path / "audit.sqlite")
    asker = RemoteAsker(
        db,
        server.url,
        max_tokens=48,
        audit=store,
        vocabulary=server.backend.vocab,
        examples=[Example(QUESTION, WRONG)],
    )
    res = asker.ask(QUESTION)
    (rep,) = res.repairs
    assert rep.kind == "autofix" and rep.sql.rstrip(";").strip() == WRONG  # greedy copy
    assert res.sql.startswith(WRONG.replace("T1.name", "T2.name"))
    rec = store.get(res.audit_id)
    assert rec.seal["mode"] == "processor"
    assert rec.seal["flags"] == ["remote-replay", "remote:grid-processor"]
    assert rec.final_sql == res.sql and rec.seal["autofix"]["generated_sql"] == rep.sql
    report = verify(store, res.audit_id)
    assert report.ok, report.describe()


@pytest.mark.parametrize("opt", [{"n_threads": 4}, {"n_gpu_layers": -1}, {"device": "cuda"}])
def test_remote_asker_refuses_placement_options(opt) -> None:
    """Threads, offload and device are the server's: a RemoteAsker refuses them (issue #28
    §4: an option that does not apply is refused, never silently ignored)."""
    with pytest.raises(OptionError, match="server's setting"):
        RemoteAsker(chinook_path(), "http://127.0.0.1:9/v1", vocabulary="ab" * 32, **opt)
