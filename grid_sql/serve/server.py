"""A small OpenAI-compatible HTTP server driving a local llama.cpp model through the batch masker.

Why it exists: the client path to a vLLM server (:mod:`grid_sql.serve.client`) and the
serving contract of paper §6.3 (requests with different guides in one running batch, masks
filled for the whole batch in one call, a request whose guide is still compiling deferred
instead of stalling its co-tenants or getting an approximate mask) need an end-to-end test
and a benchmark on a machine without a GPU. vLLM does not run here; this server speaks the
subset of vLLM's OpenAI-compatible API the client uses and runs the same engine-agnostic
core (:class:`grid_sql.serve.batch.BatchMasker`) the vLLM processor wraps.

Engine: one llama.cpp context with ``max_batch`` sequences (continuous batching). A
scheduler thread runs rounds; each round it admits waiting requests into free sequence
slots, feeds every active request its pending tokens in one ``llama_decode`` (the last
sampled token of every decoding request, then prompt chunks up to ``max_batched_tokens``),
asks the masker for the masks of every request that has
logits in one ``fill`` call, applies them, picks a token per request and retires finished
requests. Requests join and leave between rounds. A request whose mask is not ready — its guide
still compiling, or its mask a cold walk the masker handed to its worker thread (GIL released
in the kernels) — is deferred: its logits are held and it skips the round while its co-tenants
decode; a cold-mask deferral lasts at most ``max_defer_rounds`` consecutive rounds, then the
round waits for the walk. Warm masks are filled in the round without touching the worker.

Endpoints: ``GET /v1/models``, ``POST /v1/completions``, ``POST /v1/chat/completions``
(``stream`` supported as server-sent events, ``n == 1`` only). Per-request grid-sql
arguments come as vLLM's ``vllm_xargs`` (values are strings or numbers there, so the guide
spec travels as a JSON string under the key the processor reads). ``structured_outputs``
is refused with a clear error: this server stands in for vLLM *with* the processor; the
fallback mode is for real vLLM servers without it and is not emulated (an emulation here
would test our own export against our own masks, not vLLM's backend).

Every response carries a non-standard ``grid_sql`` object (mode, guide fingerprint, token
ids, rounds deferred, per-token times) that tests and the benchmark read; a real vLLM
server does not send it and the client never depends on it.
"""

from __future__ import annotations

import json
import os
import queue
import threading
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from ..errors import GridSQLError, ModelError, OptionError
from .scheduler import ServerStats, _LlamaBatchEngine, _MaskerSlots, _Request, _Scheduler

__all__ = ["GridServer", "ServerStats"]

MAX_BODY = 8 << 20  # a guide spec with a large schema stays far below this
#: the ``vllm_xargs`` key the processor reads (the same on vLLM)
GRID_KEY = "grid_sql"


# ----------------------------------------------------------------------------- HTTP


class _HTTPError(Exception):
    def __init__(self, status: int, message: str, kind: str = "BadRequestError") -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind


def _int(body: Mapping[str, Any], key: str, default: int, lo: int, hi: int) -> int:
    v = body.get(key, default)
    if v is None:
        v = default
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
        raise _HTTPError(400, f"{key} must be an integer in [{lo}, {hi}], got {v!r}")
    return v


def _float(body: Mapping[str, Any], key: str, default: float, lo: float, hi: float) -> float:
    v = body.get(key, default)
    if v is None:
        v = default
    if isinstance(v, bool) or not isinstance(v, int | float) or not lo <= float(v) <= hi:
        raise _HTTPError(400, f"{key} must be a number in [{lo}, {hi}], got {v!r}")
    return float(v)


class GridServer:
    """The test server: ``with GridServer("smollm2-135m") as srv: ... srv.url ...``.

    ``port=0`` picks a free port. ``max_batch`` is the number of sequences decoded together;
    ``n_ctx`` the KV positions they share (a request reserves prompt + ``max_tokens``);
    ``n_gpu_layers`` the model layers llama.cpp offloads to a GPU (``-1``: all; needs a GPU
    build, else :class:`OptionError`).
    ``max_batched_tokens`` caps the tokens of one round (vLLM's ``max_num_batched_tokens``):
    decoding requests go first, prompts are fed in chunks in what is left (chunked prefill),
    so a joining request's prompt bounds, not blocks, its co-tenants' step (default
    ``n_batch``).
    ``registry`` is the :class:`~grid_sql.serve.registry.GuideRegistry` guides are resolved
    through (one is made when omitted). ``processor=False`` behaves like a vLLM server
    without grid-sql's processor: ``vllm_xargs`` are accepted and ignored.
    ``max_defer_rounds``: consecutive rounds a request may be deferred for a cold mask walk
    before the round waits for it (default ``batch.MAX_DEFER_ROUNDS``; 0 walks cold masks
    inside the round's fill, the behaviour before the deferral). The model and batch
    context load in the constructor; :meth:`start` starts the scheduler and the HTTP threads.
    """

    def __init__(
        self,
        model: str | os.PathLike[str] | None = "smollm2-135m",
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        max_batch: int = 8,
        n_ctx: int = 8192,
        n_batch: int = 2048,
        n_threads: int = 2,
        n_gpu_layers: int = 0,
        registry: Any = None,
        served_model_name: str | None = None,
        processor: bool = True,
        max_batched_tokens: int | None = None,
        max_defer_rounds: int | None = None,
    ) -> None:
        if not 1 <= max_batch <= 256:
            raise OptionError(f"max_batch must be in [1, 256], got {max_batch}")
        if n_ctx < 64 or n_batch < 16:
            raise OptionError(f"n_ctx ({n_ctx}) >= 64 and n_batch ({n_batch}) >= 16 required")
        from ..decode.backend import LlamaCppBackend
        from .batch import BatchMasker

        self.backend = LlamaCppBackend(
            model, n_ctx=256, n_threads=n_threads, n_gpu_layers=n_gpu_layers
        )
        self.engine = _LlamaBatchEngine(
            self.backend, max_batch=max_batch, n_ctx=n_ctx, n_batch=n_batch, n_threads=n_threads
        )
        if registry is None:
            from .registry import GuideRegistry

            registry = GuideRegistry()
        self.registry = registry
        self.masker = (
            BatchMasker(self.backend.vocab, registry)
            if max_defer_rounds is None
            else BatchMasker(self.backend.vocab, registry, max_defer_rounds=max_defer_rounds)
        )
        self.model_name = served_model_name or self.backend.model_id
        self.scheduler = _Scheduler(self.backend, self.engine, _MaskerSlots(self.masker))
        if max_batched_tokens is not None:
            if not 1 <= max_batched_tokens <= n_batch:
                raise OptionError(f"max_batched_tokens must be in [1, n_batch={n_batch}]")
            self.scheduler.max_batched_tokens = max_batched_tokens
        self._http = _HTTPServer((host, port), _handler_for(self))
        self._http.daemon_threads = True
        self._http_thread = threading.Thread(
            target=self._http.serve_forever, name="grid-sql-http", daemon=True
        )
        self.processor = processor
        self._started = False

    @property
    def url(self) -> str:
        """Base URL of the OpenAI-compatible API (``http://host:port/v1``)."""
        host, port = self._http.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    @property
    def stats(self) -> ServerStats:
        return self.scheduler.stats

    def start(self) -> GridServer:
        if not self._started:
            self.scheduler.start()
            self._http_thread.start()
            self._started = True
        return self

    def close(self) -> None:
        if self._started:
            self._http.shutdown()
            self.scheduler.close()
            self._started = False
        self._http.server_close()
        self.masker.close()

    def __enter__(self) -> GridServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def serve_forever(self) -> None:
        """Block until interrupted (the CLI's ``grid-sql serve``)."""
        self.start()
        try:
            while self._http_thread.is_alive():
                self._http_thread.join(timeout=1.0)
        except KeyboardInterrupt:
            pass
        finally:
            self.close()

    # -- request parsing ------------------------------------------------------------------
    def _grid_args(self, body: Mapping[str, Any]) -> Mapping[str, Any] | None:
        if body.get("structured_outputs") is not None or body.get("guided_grammar") is not None:
            raise _HTTPError(
                400,
                "this test server does not implement structured_outputs/guided_grammar: it "
                "stands in for vLLM with the grid-sql processor (send vllm_xargs)",
            )
        xargs = body.get("vllm_xargs")
        if xargs is None or not self.processor:
            return None  # without the processor vLLM ignores custom arguments silently
        if not isinstance(xargs, Mapping):
            raise _HTTPError(400, f"vllm_xargs must be an object, got {type(xargs).__name__}")
        for k, v in xargs.items():
            if not isinstance(v, str | int | float) or isinstance(v, bool):
                raise _HTTPError(
                    400, f"vllm_xargs[{k!r}] must be a string or a number (as in vLLM)"
                )
        raw = xargs.get(GRID_KEY)
        if raw is None:
            return None  # other custom arguments are not ours (vLLM passes them on too)
        from .registry import parse_grid_args

        # a GridSQLError (bad spec, other tokenizer, unknown fingerprint) becomes a 400
        ref = parse_grid_args({GRID_KEY: raw})
        assert ref is not None
        key = ref if isinstance(ref, str) else ref.fingerprint
        future = self.registry.submit(ref, self.backend.vocab)  # single flight, off this thread
        err = future.exception() if future.done() else None
        if err is not None:
            raise err
        return {"fingerprint": key, "future": future}

    def _request(self, body: Mapping[str, Any], prompt_ids: list[int]) -> _Request:
        n = body.get("n", 1)
        if n not in (1, None):
            raise _HTTPError(400, "n must be 1 on this server")
        stop = body.get("stop") or ()
        if isinstance(stop, str):
            stop = (stop,)
        if not isinstance(stop, list | tuple) or not all(isinstance(s, str) and s for s in stop):
            raise _HTTPError(400, "stop must be a string or a list of non-empty strings")
        seed = body.get("seed")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise _HTTPError(400, f"seed must be an integer, got {seed!r}")
        max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
        return _Request(
            rid=uuid.uuid4().hex[:24],
            prompt_ids=prompt_ids,
            max_tokens=_int({"max_tokens": max_tokens}, "max_tokens", 16, 1, self.engine.n_ctx),
            temperature=_float(body, "temperature", 1.0, 0.0, 10.0),
            seed=seed,
            stop=tuple(stop),
            include_stop=bool(body.get("include_stop_str_in_output", False)),
            return_ids=bool(body.get("return_token_ids", False)),
            grid=self._grid_args(body),
        )

    def _prompt_ids(self, body: Mapping[str, Any], chat: bool) -> list[int]:
        if chat:
            msgs = body.get("messages")
            if not isinstance(msgs, list) or not msgs:
                raise _HTTPError(400, "messages must be a non-empty list")
            for m in msgs:
                if not (
                    isinstance(m, Mapping)
                    and isinstance(m.get("role"), str)
                    and isinstance(m.get("content"), str)
                ):
                    raise _HTTPError(400, "each message needs a string role and content")
            with self._tokenize_lock:
                return self.backend.chat_prompt(msgs)
        prompt = body.get("prompt")
        if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
            prompt = prompt[0]
        if isinstance(prompt, str) and prompt:
            with self._tokenize_lock:
                return list(self.backend.llm.tokenize(prompt.encode("utf-8"), add_bos=True))
        if (
            isinstance(prompt, list)
            and prompt
            and all(isinstance(t, int) and 0 <= t < self.backend.vocab.size for t in prompt)
        ):
            return [int(t) for t in prompt]
        raise _HTTPError(400, "prompt must be a non-empty string or a list of token ids")

    _tokenize_lock = threading.Lock()

    # -- responses ------------------------------------------------------------------------
    def _extension(self, r: _Request) -> dict[str, Any]:
        times = r.token_times
        return {
            "mode": "grid-processor" if r.grid is not None else "unconstrained",
            "fingerprint": r.grid["fingerprint"] if r.grid is not None else None,
            "token_ids": list(r.tokens),
            "deferred_rounds": r.deferred_rounds,
            "cold_deferred_rounds": r.cold_deferred_rounds,
            "queue_s": r.t_admitted - r.t_arrival if r.t_admitted else None,
            "ttft_s": times[0] - r.t_arrival if times else None,
            "itl_s": [b - a for a, b in zip(times, times[1:], strict=False)],
        }

    def _body(self, r: _Request, chat: bool) -> dict[str, Any]:
        choice: dict[str, Any] = {"index": 0, "finish_reason": r.finish_reason, "logprobs": None}
        if chat:
            choice["message"] = {"role": "assistant", "content": r.text}
        else:
            choice["text"] = r.text
        if r.return_ids:  # vLLM's return_token_ids
            choice["token_ids"] = list(r.tokens)
        return {
            "id": ("chatcmpl-" if chat else "cmpl-") + r.rid,
            "object": "chat.completion" if chat else "text_completion",
            "created": int(time.time()),
            "model": self.model_name,
            "choices": [choice],
            "usage": {
                "prompt_tokens": len(r.prompt_ids),
                "completion_tokens": len(r.tokens),
                "total_tokens": len(r.prompt_ids) + len(r.tokens),
            },
            "grid_sql": self._extension(r),
        }

    def _chunk(self, r: _Request, chat: bool, delta: str, finish: str | None) -> dict[str, Any]:
        choice: dict[str, Any] = {"index": 0, "finish_reason": finish, "logprobs": None}
        if chat:
            choice["delta"] = {"content": delta}
        else:
            choice["text"] = delta
        out: dict[str, Any] = {
            "id": ("chatcmpl-" if chat else "cmpl-") + r.rid,
            "object": "chat.completion.chunk" if chat else "text_completion",
            "created": int(time.time()),
            "model": self.model_name,
            "choices": [choice],
        }
        if finish is not None:
            out["grid_sql"] = self._extension(r)
        return out

    def handle(self, path: str, body: Mapping[str, Any]) -> tuple[_Request, bool, bool]:
        """Parse and submit a completion request; (request, chat, stream)."""
        chat = path == "/v1/chat/completions"
        if body.get("model") not in (None, self.model_name):
            raise _HTTPError(
                404,
                f"model {body.get('model')!r} is not served (try {self.model_name!r})",
                "NotFoundError",
            )
        req = self._request(body, self._prompt_ids(body, chat))
        stream = bool(body.get("stream", False))
        if stream:
            req.stream = queue.SimpleQueue()
        self.scheduler.submit(req)
        return req, chat, stream

    def events(self, r: _Request, chat: bool) -> Iterator[dict[str, Any]]:
        """The stream chunks of ``r`` as they are produced (the last carries finish_reason)."""
        assert r.stream is not None
        while True:
            kind, val = r.stream.get()
            if kind == "delta":
                yield self._chunk(r, chat, val, None)
            elif kind == "error":
                raise val
            else:
                yield self._chunk(r, chat, "", r.finish_reason)
                return


class _HTTPServer(ThreadingHTTPServer):
    # socketserver's default backlog of 5 refuses connections when a batch of clients
    # connects at once (the benchmark starts 32 together)
    request_queue_size = 256


def _error_body(status: int, message: str, kind: str) -> bytes:
    return json.dumps({"error": {"message": message, "type": kind, "code": status}}).encode()


def _handler_for(server: GridServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "grid-sql-test-server"

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            pass  # quiet: tests and benchmarks print their own

        def _send(self, status: int, payload: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def _fail(self, e: BaseException) -> None:
            if isinstance(e, _HTTPError):
                self._send(e.status, _error_body(e.status, str(e), e.kind))
            elif isinstance(e, ModelError):
                self._send(500, _error_body(500, str(e), type(e).__name__))
            elif isinstance(e, GridSQLError):
                self._send(400, _error_body(400, str(e), type(e).__name__))
            else:
                self._send(500, _error_body(500, f"{type(e).__name__}: {e}", "InternalError"))

        def do_GET(self) -> None:  # noqa: N802
            if self.path.rstrip("/") == "/v1/models":
                data = {
                    "object": "list",
                    "data": [
                        {
                            "id": server.model_name,
                            "object": "model",
                            "created": 0,
                            "owned_by": "grid-sql",
                            "max_model_len": server.engine.n_ctx,
                            # not in vLLM's answer: lets a client build a spec for this tokenizer
                            "grid_sql": {"vocabulary": server.backend.vocab.fingerprint},
                        }
                    ],
                }
                self._send(200, json.dumps(data).encode())
            elif self.path.rstrip("/") in ("/health", "/v1/health"):
                self._send(200, b"{}")
            else:
                self._send(404, _error_body(404, f"no route {self.path}", "NotFoundError"))

        def do_POST(self) -> None:  # noqa: N802
            path = self.path.rstrip("/")
            if path not in ("/v1/completions", "/v1/chat/completions"):
                self._send(404, _error_body(404, f"no route {self.path}", "NotFoundError"))
                return
            try:
                n = int(self.headers.get("Content-Length") or 0)
                if not 0 < n <= MAX_BODY:
                    raise _HTTPError(400, f"request body of {n} bytes (1..{MAX_BODY} accepted)")
                try:
                    body = json.loads(self.rfile.read(n))
                except (UnicodeDecodeError, json.JSONDecodeError) as e:
                    raise _HTTPError(400, f"request body is not JSON: {e}") from e
                if not isinstance(body, dict):
                    raise _HTTPError(400, "request body must be a JSON object")
                req, chat, stream = server.handle(path, body)
            except (_HTTPError, GridSQLError) as e:
                self._fail(e)
                return
            if stream:
                self._stream(req, chat)
                return
            req.done.wait()
            if req.error is not None:
                self._fail(req.error)
            else:
                self._send(200, json.dumps(server._body(req, chat)).encode())

        def _stream(self, req: _Request, chat: bool) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True
            try:
                for chunk in server.events(req, chat):
                    self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
                    self.wfile.flush()
            except GridSQLError as e:
                msg = {"error": {"message": str(e), "type": type(e).__name__, "code": 400}}
                self.wfile.write(b"data: " + json.dumps(msg).encode() + b"\n\n")
            except (BrokenPipeError, ConnectionResetError):
                return
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()

    return Handler


def main(argv: Sequence[str] | None = None) -> int:
    """``grid-sql serve``: the test server on a local GGUF model until interrupted."""
    import argparse

    ap = argparse.ArgumentParser(
        prog="grid-sql serve",
        description="OpenAI-compatible test server (llama.cpp, grid-sql masks per request "
        "from vllm_xargs); for tests, benchmarks and trying the client without vLLM",
    )
    ap.add_argument("--model", default="smollm2-135m", help="registry name or GGUF path")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8000)
    ap.add_argument("--max-batch", type=int, default=8, help="sequences decoded together")
    ap.add_argument("--n-ctx", type=int, default=8192, help="KV positions shared by the batch")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument(
        "--n-gpu-layers", type=int, default=0, help="layers offloaded to the GPU (-1: all)"
    )
    ap.add_argument("--store", help="on-disk guide artifact store (reload instead of rebuild)")
    a = ap.parse_args(argv)
    import sys

    registry = None
    try:
        if a.store:
            from .registry import GuideRegistry

            registry = GuideRegistry(store=a.store)
        srv = GridServer(
            a.model,
            host=a.host,
            port=a.port,
            max_batch=a.max_batch,
            n_ctx=a.n_ctx,
            n_threads=a.threads,
            n_gpu_layers=a.n_gpu_layers,
            registry=registry,
        )
    except (GridSQLError, OSError) as e:
        print(f"grid-sql serve: {e}", file=sys.stderr)
        return 2
    print(f"grid-sql test server: {srv.url} (model {srv.model_name}, batch {a.max_batch})")
    srv.serve_forever()
    return 0
