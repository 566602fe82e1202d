"""grid-sql against a remote OpenAI-compatible model server (vLLM, or grid-sql's test server).

Two declared modes, recorded on every result (:attr:`RemoteGeneration.mode`):

``"grid-processor"``
    The server runs grid-sql's batch-level logits processor
    (:mod:`grid_sql.serve.vllm`). The request carries the guide spec (dialect, role policy,
    schema, tokenizer) in ``vllm_xargs`` — vLLM passes those values, strings or numbers,
    into ``SamplingParams.extra_args`` — and the server compiles the guide once per content
    fingerprint. The masks are grid-sql's exact masks; termination is the processor mode's
    (EOS only at ACCEPT, a length stop may leave an incomplete statement).

``"server-grammar"``
    The declared fallback for a server *without* the processor: the role's projected grammar,
    lexicons included, is exported (:func:`grid_sql.grammar.export.to_vllm_structured_outputs`)
    and sent as ``structured_outputs: {"grammar": ...}`` (never the old ``guided_grammar``
    field, which current vLLM silently ignores). The mask is then the server backend's
    (XGrammar or llguidance), not grid-sql's: its language is only a superset of the role
    language (the export's adaptations say where).

In both modes nothing the server returns is trusted: the text must be a complete statement
of the role grammar (grid-sql's own parser) and pass the post-parse policy checker before
anything executes. A server without the processor ignores ``vllm_xargs`` silently, so the
mode cannot be detected from a response; it is declared by the caller, and the parse gate is
what catches a wrong declaration.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from ..ask.asker import Asker
from ..ask.generation import (
    AskGeneration,
    GenerationMode,
    GenerationRequest,
    GenerationStrategy,
)
from ..ask.result import AskResult, GeneratedSQL
from ..decode.records import StepRecord
from ..errors import (
    GridSQLError,
    GuideUnavailable,
    ModelError,
    OptionError,
    ServingError,
    StatementError,
    TokenRejected,
)
from ..grammar import Grammar
from ..mask.guide import Guide
from ..mask.vocab import Vocabulary
from ..parser.incremental import accepts

if TYPE_CHECKING:  # pragma: no cover - typing only
    from ..ask.prompt import Message
    from ..decode.backend import Backend
    from ..policy.model import Policy
    from ..schema.model import SchemaSnapshot

__all__ = [
    "MODES",
    "RemoteAsker",
    "RemoteGeneration",
    "ServerClient",
    "ServerGeneration",
    "grammar_request",
    "processor_args",
    "replay_records",
]

Mode = Literal["grid-processor", "server-grammar"]
MODES: tuple[Mode, ...] = ("grid-processor", "server-grammar")


# ----------------------------------------------------------------------------- HTTP


class ServerClient:
    """A minimal OpenAI-compatible HTTP client (stdlib only: no SDK dependency).

    ``base_url`` ends in ``/v1`` (``http://host:8000/v1``). ``model`` defaults to the first
    model the server lists.
    """

    def __init__(
        self,
        base_url: str,
        *,
        model: str | None = None,
        api_key: str | None = None,
        timeout_s: float = 300.0,
    ) -> None:
        if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
            raise OptionError(f"base_url must be an http(s) URL, got {base_url!r}")
        if timeout_s <= 0:
            raise OptionError("timeout_s must be > 0")
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self.timeout_s = timeout_s
        self._model = model

    def _open(self, method: str, path: str, body: Mapping[str, Any] | None) -> Any:
        data = None if body is None else json.dumps(body).encode("utf-8")
        req = urllib.request.Request(self.base_url + path, data=data, method=method)
        req.add_header("Content-Type", "application/json")
        if self.api_key:
            req.add_header("Authorization", f"Bearer {self.api_key}")
        try:
            return urllib.request.urlopen(req, timeout=self.timeout_s)
        except urllib.error.HTTPError as e:
            raise _server_error(e.code, e.read()) from None
        except (urllib.error.URLError, OSError) as e:
            raise ServingError(f"cannot reach the model server at {self.base_url}: {e}") from e

    def _json(self, method: str, path: str, body: Mapping[str, Any] | None = None) -> Any:
        with self._open(method, path, body) as resp:
            raw = resp.read()
        try:
            return json.loads(raw)
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise ServingError(
                f"{self.base_url}{path} answered with non-JSON: {raw[:200]!r}"
            ) from e

    def models(self) -> list[str]:
        """The model ids the server lists (``GET /v1/models``)."""
        out = self._json("GET", "/models")
        try:
            return [str(m["id"]) for m in out["data"]]
        except (KeyError, TypeError) as e:
            raise ServingError(f"malformed /models answer: {out!r:.200}") from e

    @property
    def model(self) -> str:
        if self._model is None:
            names = self.models()
            if not names:
                raise ServingError(f"{self.base_url} serves no model")
            self._model = names[0]
        return self._model

    def chat(self, messages: Sequence[Mapping[str, str]], **params: Any) -> dict[str, Any]:
        """``POST /chat/completions`` (non-streaming); the parsed JSON answer."""
        body = {"model": self.model, "messages": [dict(m) for m in messages], **params}
        body.pop("stream", None)
        out = self._json("POST", "/chat/completions", body)
        _check_completion(out, chat=True)
        return dict(out)

    def complete(self, prompt: str | Sequence[int], **params: Any) -> dict[str, Any]:
        """``POST /completions`` (non-streaming); the parsed JSON answer."""
        p: Any = prompt if isinstance(prompt, str) else [int(t) for t in prompt]
        body = {"model": self.model, "prompt": p, **params}
        body.pop("stream", None)
        out = self._json("POST", "/completions", body)
        _check_completion(out, chat=False)
        return dict(out)

    def stream(self, path: str, body: Mapping[str, Any]) -> Iterator[tuple[float, dict[str, Any]]]:
        """Server-sent events of a streaming request: ``(perf_counter at arrival, chunk)``.

        The benchmark's clock: a chunk's arrival time is what a user sees, on vLLM and on the
        test server alike.
        """
        full = {"model": self.model, **body, "stream": True}
        with self._open("POST", path, full) as resp:
            for line in resp:
                t = time.perf_counter()
                line = line.strip()
                if not line.startswith(b"data:"):
                    continue
                payload = line[5:].strip()
                if payload == b"[DONE]":
                    return
                chunk = json.loads(payload)
                if "error" in chunk:
                    err = chunk["error"]
                    raise _server_error(int(err.get("code", 500)), json.dumps(chunk).encode())
                yield t, chunk


def _server_error(status: int, raw: bytes) -> GridSQLError:
    """A typed error from an error answer: the grid-sql class the server named, if any."""
    try:
        err = json.loads(raw).get("error", {})
        message = str(err.get("message", "")) or raw.decode("utf-8", "replace")
        kind = str(err.get("type", ""))
    except (ValueError, AttributeError):
        message, kind = raw.decode("utf-8", "replace")[:500], ""
    from .. import errors

    cls = getattr(errors, kind, None)
    text = f"model server answered {status}: {message}"
    if isinstance(cls, type) and issubclass(cls, GridSQLError) and cls is not errors.GridSQLError:
        try:
            return cls(text)
        except TypeError:  # a class with a richer constructor
            pass
    return ServingError(text)


def _check_completion(out: Any, *, chat: bool) -> None:
    try:
        choice = out["choices"][0]
        text = choice["message"]["content"] if chat else choice["text"]
    except (KeyError, IndexError, TypeError) as e:
        raise ServingError(f"malformed completion answer: {out!r:.300}") from e
    if not isinstance(text, str):
        raise ServingError(f"completion text is {type(text).__name__}, not a string")


# ----------------------------------------------------------------------------- requests


def grammar_request(
    grammar: Grammar, backend: Literal["xgrammar", "guidance"] = "xgrammar"
) -> tuple[dict[str, Any], tuple[str, ...]]:
    """Request fields for the ``server-grammar`` fallback, and the export's adaptations.

    ``backend`` is the server's structured-output backend (``--structured-outputs-config``
    on vLLM): XGrammar reads the EBNF export, ``guidance`` (llguidance) the Lark export.
    """
    from ..grammar.export import to_vllm_structured_outputs

    fields, export = to_vllm_structured_outputs(grammar, backend)
    return {"structured_outputs": fields}, tuple(export.adaptations)


#: the ``vllm_xargs`` key grid-sql's processor reads
GRID_KEY = "grid_sql"


def processor_args(
    snapshot: SchemaSnapshot, policy: Policy, vocabulary: str
) -> tuple[dict[str, str], str]:
    """``vllm_xargs`` carrying the guide spec of (schema, role policy, tokenizer), and the
    spec's content fingerprint (what later requests may send instead of the spec).

    ``vllm_xargs`` values are strings or numbers on vLLM's HTTP API, so the spec travels as a
    JSON string.
    """
    from .registry import GuideSpec, grid_args

    spec = GuideSpec.from_parts(policy, snapshot, vocabulary)
    return grid_args(spec), spec.fingerprint


@dataclass
class RemoteGeneration:
    """One remote generation: the text, which mode ran, and what the server reported."""

    text: str
    mode: Mode
    finish_reason: str
    prompt_tokens: int
    completion_tokens: int
    seconds: float
    fingerprint: str | None = None  # the guide's content fingerprint (grid-processor)
    adaptations: tuple[str, ...] = ()  # where the server's language differs (server-grammar)
    raw: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def sql(self) -> str:
        return self.text.strip()

    @property
    def stop_reason(self) -> str:
        """The decode layer's stop vocabulary: ``eos`` or ``truncated`` (a length stop)."""
        return "eos" if self.finish_reason == "stop" else "truncated"


@dataclass
class RemoteGeneratedSQL(GeneratedSQL):
    """:class:`GeneratedSQL` plus the serving mode that produced it."""

    mode: str = ""


@dataclass
class RemoteAskResult(AskResult):
    """:class:`AskResult` plus the serving mode that produced the statement."""

    mode: str = ""


# ----------------------------------------------------------------------------- the strategy


class ServerGeneration(GenerationStrategy):
    """The Asker's generation strategy for a model behind an OpenAI-compatible server, in the
    declared ``mode`` (module doc). Every answer must be a complete statement of the role
    grammar (grid-sql's parser) before the Asker even checks it.

    ``vocabulary``: the served model's :class:`~grid_sql.mask.vocab.Vocabulary` (needed to
    replay the server's tokens into audit records, :func:`replay_records`) or its fingerprint
    (enough for the processor's guide spec), else read from the server's model list. Seals
    are ``processor`` mode, flagged ``remote-replay`` and the mode."""

    seal_mode = "processor"  # masks on the server: EOS-only-at-ACCEPT termination

    def __init__(
        self,
        client: ServerClient,
        *,
        mode: Mode = "grid-processor",
        grammar_backend: Literal["xgrammar", "guidance"] = "xgrammar",
        vocabulary: str | Vocabulary | None = None,
        temperature: float = 0.0,
        seed: int | None = None,
    ) -> None:
        if mode not in MODES:
            raise OptionError(f"mode must be one of {MODES}, got {mode!r}")
        if grammar_backend not in ("xgrammar", "guidance"):
            raise OptionError(
                f"grammar_backend must be xgrammar or guidance, not {grammar_backend!r}"
            )
        self.client = client
        self.mode: Mode = mode
        self.grammar_backend = grammar_backend
        self.temperature = float(temperature)
        self.seed = seed
        self.vocab = vocabulary if isinstance(vocabulary, Vocabulary) else None
        self._vocabulary = (
            vocabulary
            if vocabulary is None or isinstance(vocabulary, str)
            else (vocabulary.fingerprint)
        )
        self.last: RemoteGeneration | None = None
        self._replay_guides: dict[str, Guide] = {}
        self._known: set[str] = set()  # fingerprints whose spec the server has accepted
        self._request_cache: dict[int, tuple[dict[str, Any], tuple[str, ...], str | None]] = {}

    @property
    def seal_flags(self) -> tuple[str, ...]:
        return ("remote-replay", f"remote:{self.mode}")

    def forget(self) -> None:
        self._request_cache.clear()  # keyed by the old modes' ids

    @property
    def vocabulary(self) -> str:
        """The server model's tokenizer fingerprint (a guide spec is compiled for it).

        Given by the caller, else read from the server's model list: grid-sql's test server
        advertises it there, vLLM does not (pass ``vocabulary=`` for a vLLM server).
        """
        if self._vocabulary is None:
            out = self.client._json("GET", "/models")
            try:
                card = next(m for m in out["data"] if m["id"] == self.client.model)
                self._vocabulary = str(card["grid_sql"]["vocabulary"])
            except (KeyError, TypeError, StopIteration):
                raise OptionError(
                    "the server does not advertise its tokenizer fingerprint; pass "
                    "vocabulary= (a Vocabulary of the served model, or its fingerprint)"
                ) from None
        return self._vocabulary

    # -- requests ---------------------------------------------------------------------------
    def _request_fields(
        self, mode: GenerationMode, snapshot: SchemaSnapshot
    ) -> tuple[dict[str, Any], tuple[str, ...], str | None]:
        """(extra request fields, export adaptations, guide fingerprint) for ``mode``."""
        key = id(mode)
        hit = self._request_cache.get(key)
        if hit is not None:
            return hit
        if self.mode == "server-grammar":
            fields, adaptations = grammar_request(mode.grammar, self.grammar_backend)
            out: tuple[dict[str, Any], tuple[str, ...], str | None] = (fields, adaptations, None)
        else:
            xargs, fp = processor_args(snapshot, mode.policy, self.vocabulary)
            out = ({"vllm_xargs": xargs}, (), fp)
        self._request_cache[key] = out
        return out

    def generate_remote(
        self,
        messages: Sequence[Message],
        max_tokens: int,
        mode: GenerationMode,
        snapshot: SchemaSnapshot,
        *,
        token_ids: bool = False,
    ) -> RemoteGeneration:
        """One generation on the server, gated by the role grammar's parser (``token_ids``:
        ask the server for the generated token ids, to replay them for the audit)."""
        fields, adaptations, fp = self._request_fields(mode, snapshot)
        # A top-level ';' ends the statement (the local loop's stop-at-ACCEPT); a ';' inside a
        # literal cuts the text short, and the parse gate below refuses it.
        params: dict[str, Any] = {
            "max_tokens": max_tokens,
            "temperature": self.temperature,
            "stop": [";"],
            "include_stop_str_in_output": True,
        }
        if token_ids:
            params["return_token_ids"] = True  # vLLM: choices[0].token_ids
        if self.seed is not None:
            params["seed"] = self.seed
        t0 = time.perf_counter()
        if fp is not None and fp in self._known:
            # the server has the spec: its fingerprint names the guide (a restarted or
            # evicting server answers GuideUnavailable, and the spec is sent again)
            try:
                out = self.client.chat(messages, **params, vllm_xargs={GRID_KEY: fp})
            except GuideUnavailable:
                self._known.discard(fp)
                out = self.client.chat(messages, **params, **fields)
        else:
            out = self.client.chat(messages, **params, **fields)
        if fp is not None:
            self._known.add(fp)
        seconds = time.perf_counter() - t0
        choice = out["choices"][0]
        usage = out.get("usage") or {}
        gen = RemoteGeneration(
            text=choice["message"]["content"],
            mode=self.mode,
            finish_reason=str(choice.get("finish_reason") or ""),
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
            completion_tokens=int(usage.get("completion_tokens") or 0),
            seconds=seconds,
            fingerprint=fp,
            adaptations=adaptations,
            raw=out,
        )
        self.last = gen
        if not accepts(mode.grammar, gen.sql.encode("utf-8")):
            why = (
                "the length limit cut it (processor mode ends only at EOS)"
                if gen.finish_reason == "length"
                else "the server's mask was not grid-sql's"
                if self.mode == "server-grammar"
                else "is the grid-sql processor installed on the server? without it vllm_xargs "
                "is silently ignored"
            )
            err = StatementError(
                f"the server's answer is not a complete statement of the role's language "
                f"({self.mode} mode; {why}) and was not run:\n{gen.sql}"
            )
            err.mode = self.mode  # type: ignore[attr-defined]
            raise err.about(gen.sql)
        return gen

    def generate(self, request: GenerationRequest) -> AskGeneration:
        gen = self.generate_remote(
            request.messages,
            request.max_tokens,
            request.mode,
            request.snapshot,
            token_ids=request.records,
        )
        records: list[StepRecord] = []
        stop = gen.stop_reason
        guide: Guide | None = None
        mask_s = 0.0
        if request.records and self.vocab is not None:
            guide = self._replay_guide(request.mode.grammar, self.vocab)
            t0 = time.perf_counter()
            records, stop = replay_records(guide, _token_ids(gen.raw))
            mask_s = time.perf_counter() - t0
        return AskGeneration(
            sql=gen.sql,
            stop_reason=stop,
            records=records,
            seconds=gen.seconds,
            mask_seconds=mask_s,
            n_tokens=gen.completion_tokens,
            guide=guide,  # type: ignore[arg-type]  # None only when nothing is sealed
            model_id=self.client.model,
        )

    def _replay_guide(self, grammar: Grammar, vocab: Vocabulary) -> Guide:
        g = self._replay_guides.get(grammar.fingerprint)
        if g is None:
            g = self._replay_guides[grammar.fingerprint] = Guide(grammar, vocab)
        return g


# ----------------------------------------------------------------------------- the asker


class RemoteAsker(Asker):
    """An :class:`~grid_sql.ask.asker.Asker` whose model runs behind an OpenAI-compatible
    server: the same policy, prompt, post-parse checker, repair round and safe execution,
    with generation delegated to the server in the declared ``mode`` (its generation
    strategy is a :class:`ServerGeneration`; nothing of the Asker is overridden but the
    result types, which carry the mode, and :attr:`backend`, which is the server's).

    ``server`` is a base URL (``http://host:8000/v1``) or a :class:`ServerClient`.
    ``grammar_backend`` names the server's structured-output backend for the
    ``server-grammar`` mode.

    Audit: a server returns token ids, not grid-sql's per-token records. With ``audit`` on
    (it is off by default here) and ``vocabulary`` given as the served model's
    :class:`~grid_sql.mask.vocab.Vocabulary`, every generation's token ids are replayed under
    the role's guide on the client — each step's exact mask recomputed, the token checked
    against it — and sealed as a processor-mode record flagged ``remote-replay`` (and the
    mode). A token outside the exact mask (possible in ``server-grammar`` mode) raises
    :class:`TokenRejected` and nothing runs. The replay costs the client the mask fills the
    server already did.
    """

    generation: ServerGeneration

    def __init__(
        self,
        db: Any,
        server: str | ServerClient,
        *,
        mode: Mode = "grid-processor",
        grammar_backend: Literal["xgrammar", "guidance"] = "xgrammar",
        vocabulary: str | Vocabulary | None = None,
        temperature: float = 0.0,
        seed: int | None = None,
        **kw: Any,
    ) -> None:
        client = server if isinstance(server, ServerClient) else ServerClient(server)
        strategy = ServerGeneration(
            client,
            mode=mode,
            grammar_backend=grammar_backend,
            vocabulary=vocabulary,
            temperature=temperature,
            seed=seed,
        )
        kw.setdefault("audit", False)
        if kw["audit"] is not False and not isinstance(vocabulary, Vocabulary):
            raise OptionError(
                "a RemoteAsker seals audit records by replaying the server's tokens, which "
                "needs vocabulary= the served model's Vocabulary (or pass audit=False)"
            )
        if kw.get("model") is not None:
            raise OptionError("a RemoteAsker's model is the server's (pass server=..., not model=)")
        if kw.get("generation") is not None:
            raise OptionError("a RemoteAsker's generation is the server's (ServerGeneration)")
        for k in ("n_threads", "n_gpu_layers", "device"):
            # placement is the server's (vLLM's own flags; `grid-sql serve --threads
            # --n-gpu-layers`): accepting it here would say it applied when it did not
            if kw.get(k) is not None:
                raise OptionError(
                    f"{k} is the server's setting, not a RemoteAsker's (set it where the model "
                    "is served); a RemoteAsker takes n_ctx, for its prompt budget"
                )
        super().__init__(db, generation=strategy, **kw)

    # -- the strategy's settings, as the RemoteAsker's attributes ------------------------------
    @property
    def client(self) -> ServerClient:
        return self.generation.client

    @property
    def mode(self) -> Mode:
        return self.generation.mode

    @property
    def grammar_backend(self) -> str:
        return self.generation.grammar_backend

    @property
    def temperature(self) -> float:
        return self.generation.temperature

    @property
    def seed(self) -> int | None:
        return self.generation.seed

    @property
    def last(self) -> RemoteGeneration | None:
        """The last generation the server answered (its raw answer included)."""
        return self.generation.last

    @property
    def vocabulary(self) -> str:
        """The server model's tokenizer fingerprint (:attr:`ServerGeneration.vocabulary`)."""
        return self.generation.vocabulary

    @property
    def backend(self) -> Backend:
        raise ModelError("a RemoteAsker has no local model: generation runs on the server")

    def generate_remote(
        self, messages: Sequence[Message], max_tokens: int, mode: GenerationMode
    ) -> RemoteGeneration:
        """One generation on the server, gated by the role grammar's parser."""
        return self.generation.generate_remote(
            messages, max_tokens, mode, self.snapshot, token_ids=self.audit is not None
        )

    # -- results carry the mode ---------------------------------------------------------------
    def generate_sql(self, question: str, **options: Any) -> RemoteGeneratedSQL:
        res = super().generate_sql(question, **options)
        return RemoteGeneratedSQL(**_fields(res), mode=self.mode)

    def ask(self, question: str, **options: Any) -> RemoteAskResult:
        res = super().ask(question, **options)
        return RemoteAskResult(**_fields(res), mode=self.mode)


def _token_ids(answer: Mapping[str, Any]) -> list[int]:
    """The generated token ids of an answer: vLLM's ``choices[0].token_ids``
    (``return_token_ids``), else the test server's ``grid_sql.token_ids``."""
    ids = answer["choices"][0].get("token_ids")
    if ids is None:
        ids = (answer.get("grid_sql") or {}).get("token_ids")
    if not isinstance(ids, list) or not all(isinstance(t, int) for t in ids):
        raise ServingError("the server returned no token ids to replay for the audit record")
    return [int(t) for t in ids]


def replay_records(guide: Guide, token_ids: Sequence[int]) -> tuple[list[StepRecord], str]:
    """Per-token records of ``token_ids`` under ``guide``, each step's exact mask recomputed,
    and the stop reason (``eos``, ``stop_at_accept`` at a complete statement without EOS, or
    ``truncated``). Raises :class:`TokenRejected` for a token outside its step's mask."""
    from ..decode.records import StepKind, StopReason, mask_digest

    m = guide.matcher()
    buf = m.allocate_bitmask()
    records: list[StepRecord] = []
    size = guide.vocab.size
    for tok in token_ids:
        if m.is_terminated():
            break
        cfg = m.config
        n, entry_ids = guide.fill_bitmask(cfg, buf)
        if not (int(buf[tok >> 5]) >> (tok & 31)) & 1:
            raise TokenRejected(f"remote token {tok} at step {len(records)} is outside the mask")
        m.accept_token(tok)
        records.append(
            StepRecord(
                step=len(records),
                config_hash=cfg.config_hash,
                entry_ids=tuple(entry_ids),
                mask_digest=mask_digest(buf),
                token=tok,
                allowed=n,
                blocked=size - n,
                kind=StepKind.EOS if tok == guide.eos_id else StepKind.SAMPLED,
            )
        )
    if records and records[-1].kind == StepKind.EOS:
        return records, StopReason.EOS.value
    if m.is_accepting():
        return records, StopReason.STOP_AT_ACCEPT.value
    return records, StopReason.TRUNCATED.value


def _fields(obj: Any) -> dict[str, Any]:
    import dataclasses

    return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
