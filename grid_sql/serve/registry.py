"""Guides compiled on the server side, named by content fingerprint (paper §6.3, §6.4).

A client names the guide it wants by a fingerprint over (dialect, role policy, schema,
tokenizer), and sends the :class:`GuideSpec` that fingerprint hashes the first time. The
server derives the role grammar from the spec exactly as the client would
(:func:`~grid_sql.policy.grammar.role_grammar` over the shipped dialect), compiles it against
its own tokenizer, and keeps the :class:`~grid_sql.mask.guide.Guide`:

* **single flight** — N concurrent requests for a cold fingerprint share one build (one
  ``Future``); they all get the guide or the *same* exception, and a failure is remembered
  for ``failure_ttl`` seconds so a burst of bad requests does not rebuild it N times;
* **bounded** — an LRU of ``capacity`` compiled guides (their mask cache entries live in the
  shared :class:`~grid_sql.mask.cache.MaskCache`, bounded on its own);
* **on disk** — with ``store=DIR`` the derived role grammar is written as a content-addressed
  artifact (the audit archive's grammar encoding, which rebuilds only to its own
  fingerprint); a restarted server reloads it instead of re-deriving, an artifact written by a
  grid-sql with another dialect grammar is stale and rebuilt, and a corrupted one is rebuilt
  and rewritten.

Builds run on the registry's worker threads, never on the caller's: an engine thread that
only needs a ready guide uses :meth:`GuideRegistry.ready` (never blocks) or waits on the
future with the GIL released.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from ..errors import GridSQLError, GuideSpecError, GuideUnavailable
from ..grammar.dialects import canonical_dialect, load_dialect
from ..grammar.fingerprint import fingerprint
from ..grammar.ir import Grammar
from ..mask.cache import MaskCache
from ..mask.guide import Guide
from ..mask.vocab import Vocabulary
from ..policy.model import Policy
from ..schema.model import SchemaSnapshot
from ..store import sharded, write_atomic

SPEC_VERSION = 1
STORE_FORMAT = 1
GRID_ARG = "grid_sql"  # key in SamplingParams.extra_args / vllm_xargs
_HEX = frozenset("0123456789abcdef")


def _canon(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def is_fingerprint(s: object) -> bool:
    return isinstance(s, str) and len(s) == 64 and set(s) <= _HEX


def _canon_dialect(name: str) -> str | None:
    try:
        return canonical_dialect(name)
    except GridSQLError:
        return None


@dataclass(frozen=True)
class GuideSpec:
    """What a client sends so a server can compile its guide: plain JSON data.

    ``policy`` is :meth:`Policy.to_dict`, ``schema`` :meth:`SchemaSnapshot.to_dict`,
    ``vocabulary`` the :attr:`Vocabulary.fingerprint` the client expects the server's
    tokenizer to have (a server with another tokenizer refuses the spec rather than compile
    masks for token ids that mean something else).
    """

    dialect: str
    policy: Mapping[str, Any]
    schema: Mapping[str, Any]
    vocabulary: str
    version: int = SPEC_VERSION
    _parsed: tuple[Policy, SchemaSnapshot] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.version != SPEC_VERSION:
            raise GuideSpecError(f"guide spec version {self.version!r} (this server reads 1)")
        if not isinstance(self.dialect, str):
            raise GuideSpecError("guide spec: dialect must be a string")
        try:
            dialect = canonical_dialect(self.dialect)
        except GridSQLError as e:
            raise GuideSpecError(f"guide spec: {e}") from e
        object.__setattr__(self, "dialect", dialect)
        if not is_fingerprint(self.vocabulary):
            raise GuideSpecError("guide spec: vocabulary must be a 64-hex tokenizer fingerprint")
        if not isinstance(self.policy, Mapping) or not isinstance(self.schema, Mapping):
            raise GuideSpecError("guide spec: policy and schema must be JSON objects")
        try:
            policy = Policy.from_dict(self.policy)
            snap = SchemaSnapshot.from_dict(dict(self.schema))
        except (KeyError, TypeError, ValueError, AssertionError, AttributeError) as e:
            raise GuideSpecError(f"guide spec: malformed policy or schema ({e!r})") from e
        # canonical round trip: an unknown or mistyped field is an error, not silently dropped
        if _canon(policy.to_dict()) != _canon(json.loads(_canon(dict(self.policy)))):
            raise GuideSpecError("guide spec: policy is not a Policy.to_dict() form")
        if snap.canonical_json() != _canon(json.loads(_canon(dict(self.schema)))):
            raise GuideSpecError("guide spec: schema is not a SchemaSnapshot.to_dict() form")
        if _canon_dialect(policy.dialect) != dialect or _canon_dialect(snap.dialect) != dialect:
            raise GuideSpecError(
                f"guide spec: dialect {dialect!r} but policy for {policy.dialect!r} and "
                f"schema of {snap.dialect!r}"
            )
        object.__setattr__(self, "_parsed", (policy, snap))

    @classmethod
    def from_parts(
        cls, policy: Policy, snapshot: SchemaSnapshot, vocabulary: Vocabulary | str
    ) -> GuideSpec:
        vfp = vocabulary if isinstance(vocabulary, str) else vocabulary.fingerprint
        return cls(
            dialect=snapshot.dialect,
            policy=json.loads(_canon(policy.to_dict())),
            schema=json.loads(snapshot.canonical_json()),
            vocabulary=vfp,
        )

    @classmethod
    def from_json(cls, obj: Mapping[str, Any] | str | bytes) -> GuideSpec:
        if isinstance(obj, (str, bytes)):
            try:
                obj = json.loads(obj)
            except ValueError as e:
                raise GuideSpecError(f"guide spec is not JSON: {e}") from e
        if not isinstance(obj, Mapping):
            raise GuideSpecError(f"guide spec must be a JSON object, not {type(obj).__name__}")
        keys = {"dialect", "policy", "schema", "vocabulary", "version"}
        extra = set(obj) - keys
        missing = keys - {"version"} - set(obj)
        if extra or missing:
            raise GuideSpecError(
                f"guide spec fields: missing {sorted(missing)}, unknown {sorted(extra)}"
            )
        return cls(
            dialect=obj["dialect"],
            policy=obj["policy"],
            schema=obj["schema"],
            vocabulary=obj["vocabulary"],
            version=obj.get("version", SPEC_VERSION),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "dialect": self.dialect,
            "policy": json.loads(_canon(dict(self.policy))),
            "schema": json.loads(_canon(dict(self.schema))),
            "vocabulary": self.vocabulary,
        }

    @property
    def policy_obj(self) -> Policy:
        return self._parsed[0]

    @property
    def snapshot(self) -> SchemaSnapshot:
        return self._parsed[1]

    @cached_property
    def fingerprint(self) -> str:
        """Content address: (version, dialect, policy fp, schema fp, tokenizer fp)."""
        return fingerprint(
            "guide-spec",
            {
                "version": self.version,
                "dialect": self.dialect,
                "policy": self.policy_obj.fingerprint,
                "schema": self.snapshot.fingerprint,
                "vocabulary": self.vocabulary,
            },
        )

    def build_grammar(self) -> Grammar:
        """The role grammar, derived as the client derives it (may raise EmptyLanguageError)."""
        from ..policy.grammar import role_grammar

        return role_grammar(load_dialect(self.dialect), self.snapshot, self.policy_obj)


GuideRef = GuideSpec | str


def parse_grid_args(extra_args: Mapping[str, Any] | None) -> GuideRef | None:
    """The guide a request asks for, from ``SamplingParams.extra_args`` / ``vllm_xargs``.

    ``extra_args["grid_sql"]`` is a spec (a JSON object, or its JSON text since vLLM's
    ``vllm_xargs`` carry strings and numbers only) or a bare 64-hex fingerprint of a spec the
    server has seen. Absent: None (the request is not masked).
    """
    if not extra_args or GRID_ARG not in extra_args:
        return None
    v = extra_args[GRID_ARG]
    if is_fingerprint(v):
        return str(v)
    if isinstance(v, str):
        return _spec_from_text(v)
    if isinstance(v, (bytes, Mapping)):
        return GuideSpec.from_json(v)
    raise GuideSpecError(
        f"extra_args[{GRID_ARG!r}] must be a guide spec or a fingerprint, not {type(v).__name__}"
    )


@functools.lru_cache(maxsize=256)
def _spec_from_text(text: str) -> GuideSpec:
    """Validated specs by their JSON text: a server sees the same spec text on every request
    of a client session, and validating it (policy and schema round trips) costs
    milliseconds on the engine thread (a GuideSpecError is not cached)."""
    return GuideSpec.from_json(text)


def grid_args(spec: GuideSpec, *, by_fingerprint: bool = False) -> dict[str, str]:
    """The ``vllm_xargs`` / ``extra_args`` a client sends for ``spec``."""
    return {GRID_ARG: spec.fingerprint if by_fingerprint else _canon(spec.to_json())}


# ------------------------------------------------------------------------------ disk store


class GuideStore:
    """Content-addressed artifacts: ``DIR/v1/<fp[:2]>/<fp>.json``, written atomically by the
    one on-disk store (``grid_sql/store.py``) under a directory the operator chooses.

    Each holds the spec, the L1 dialect fingerprint it was derived with and the role grammar
    as the audit archive encodes it (rebuilt only if it hashes to its own fingerprint).
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root) / f"v{STORE_FORMAT}"

    def path(self, fp: str) -> Path:
        return sharded(self.root, fp, ".json")

    def write(self, spec: GuideSpec, grammar: Grammar) -> bool:
        """Archive ``grammar`` under ``spec``'s fingerprint through the store's atomic write;
        False when the disk refuses (a read-only or full store only costs the next start a
        rebuild, as for the grammar, lexer and trie entries: serving does not fail on it)."""
        from ..audit.artifacts import grammar_artifact

        art = grammar_artifact(grammar)
        body = {
            "format": STORE_FORMAT,
            "fingerprint": spec.fingerprint,
            "spec": spec.to_json(),
            "l1": grammar.l1_fingerprint,
            "grammar": art.fingerprint,
            "payload": base64.b64encode(art.payload).decode("ascii"),
        }
        text = _canon(body)
        doc = {"sha256": hashlib.sha256(text.encode()).hexdigest(), "body": body}
        return write_atomic(self.path(spec.fingerprint), _canon(doc).encode("utf-8"))

    def spec(self, fp: str) -> GuideSpec | None:
        """The spec stored under ``fp`` (None if absent or unreadable)."""
        try:
            doc = json.loads(self.path(fp).read_text(encoding="utf-8"))
            spec = GuideSpec.from_json(doc["body"]["spec"])
        except (OSError, ValueError, KeyError, TypeError):
            return None
        return spec if spec.fingerprint == fp else None

    def load(self, spec: GuideSpec) -> Grammar | None:
        """The stored role grammar of ``spec``; None when absent; raises ValueError when the
        entry is corrupt or stale (the caller rebuilds and rewrites it)."""
        from ..audit.artifacts import Artifact, rebuild_grammar

        p = self.path(spec.fingerprint)
        try:
            raw = p.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        except OSError as e:
            raise ValueError(f"unreadable: {e}") from e
        try:
            doc = json.loads(raw)
            body = doc["body"]
            if hashlib.sha256(_canon(body).encode()).hexdigest() != doc["sha256"]:
                raise ValueError("checksum mismatch")
            if body["format"] != STORE_FORMAT or body["fingerprint"] != spec.fingerprint:
                raise ValueError("format or fingerprint mismatch")
            if body["l1"] != load_dialect(spec.dialect).l1_fingerprint:
                raise ValueError("stale: derived from another dialect grammar")
            art = Artifact(body["grammar"], "grammar", base64.b64decode(body["payload"]))
            return rebuild_grammar(art)
        except (KeyError, TypeError, GridSQLError) as e:
            raise ValueError(str(e)) from e


# ------------------------------------------------------------------------------ registry


@dataclass
class RegistryStats:
    builds: int = 0  # role grammars derived from a spec
    loads: int = 0  # role grammars reloaded from the store
    rebuilt_corrupt: int = 0  # store entries found corrupt or stale and rewritten
    hits: int = 0  # guide already compiled in memory
    joined: int = 0  # callers that joined a build in flight
    failures: int = 0  # builds that raised
    write_failures: int = 0  # built grammars the disk store refused to keep
    evictions: int = 0


class GuideRegistry:
    """Compiled guides by spec fingerprint: single flight, bounded LRU, optional disk store.

    Thread-safe; the :class:`Guide` objects it hands out are shared and immutable. One
    registry may serve several tokenizers: the fingerprint covers the tokenizer, and a build
    needs the server's :class:`Vocabulary` (it must be the one the spec names).
    """

    def __init__(
        self,
        *,
        capacity: int = 32,
        store: str | os.PathLike[str] | None = None,
        failure_ttl: float = 30.0,
        max_workers: int = 1,
        cache: MaskCache | None = None,
        warm: bool = True,
    ) -> None:
        if capacity < 1 or max_workers < 1 or failure_ttl < 0:
            raise ValueError("capacity and max_workers must be >= 1, failure_ttl >= 0")
        self.capacity = capacity
        self.failure_ttl = failure_ttl
        self.store = GuideStore(store) if store is not None else None
        self.cache = cache
        self.warm = warm
        self.stats = RegistryStats()
        self._lock = threading.Lock()
        self._guides: OrderedDict[str, Guide] = OrderedDict()
        self._specs: OrderedDict[str, GuideSpec] = OrderedDict()
        self._inflight: dict[str, Future[Guide]] = {}
        self._failed: dict[str, tuple[float, BaseException]] = {}
        self._pool = ThreadPoolExecutor(max_workers, thread_name_prefix="grid-sql-guide")

    # -- specs ------------------------------------------------------------------------
    def register(self, spec: GuideSpec) -> str:
        """Remember ``spec`` (no build); returns its fingerprint."""
        fp = spec.fingerprint
        with self._lock:
            self._specs[fp] = spec
            self._specs.move_to_end(fp)
            while len(self._specs) > 8 * self.capacity:
                self._specs.popitem(last=False)
        return fp

    def spec(self, fp: str) -> GuideSpec:
        with self._lock:
            got = self._specs.get(fp)
        if got is None and self.store is not None:
            got = self.store.spec(fp)
            if got is not None:
                self.register(got)
        if got is None:
            raise GuideUnavailable(
                f"no guide spec under fingerprint {fp[:16]}: send the spec (not only its "
                "fingerprint) with the first request"
            )
        return got

    # -- guides -----------------------------------------------------------------------
    def ready(self, fp: str) -> Guide | None:
        """The compiled guide if it is in memory now (never blocks, never builds)."""
        with self._lock:
            g = self._guides.get(fp)
            if g is not None:
                self._guides.move_to_end(fp)
            return g

    def submit(self, ref: GuideRef, vocab: Vocabulary) -> Future[Guide]:
        """A future of the guide ``ref`` names, compiled against ``vocab`` (single flight)."""
        spec = ref if isinstance(ref, GuideSpec) else None
        fp = spec.fingerprint if spec is not None else str(ref)
        with self._lock:
            g = self._guides.get(fp)
            if g is not None:
                self._guides.move_to_end(fp)
                self.stats.hits += 1
                return _done(g)
            fut = self._inflight.get(fp)
            if fut is not None:
                self.stats.joined += 1
                return fut
            failed = self._failed.get(fp)
            if failed is not None:
                if time.monotonic() < failed[0]:
                    return _failed(failed[1])
                del self._failed[fp]
        if spec is None:
            spec = self.spec(fp)
        else:
            self.register(spec)
        if spec.vocabulary != vocab.fingerprint:
            raise GuideUnavailable(
                f"guide {fp[:16]} was specified for tokenizer {spec.vocabulary[:16]}, this "
                f"server's is {vocab.fingerprint[:16]} ({vocab.source})"
            )
        with self._lock:  # re-check: another thread may have started it meanwhile
            fut = self._inflight.get(fp)
            if fut is not None:
                self.stats.joined += 1
                return fut
            g = self._guides.get(fp)
            if g is not None:
                self.stats.hits += 1
                return _done(g)
            fut = Future()
            fut.set_running_or_notify_cancel()
            self._inflight[fp] = fut
        self._pool.submit(self._build, spec, vocab, fut)
        return fut

    def get(self, ref: GuideRef, vocab: Vocabulary, timeout: float | None = None) -> Guide:
        """The guide, blocking until it is built; raises GuideUnavailable (cause chained)."""
        fut = self.submit(ref, vocab)
        try:
            return fut.result(timeout)
        except TimeoutError as e:
            raise GuideUnavailable(f"guide not built within {timeout} s") from e

    def _build(self, spec: GuideSpec, vocab: Vocabulary, fut: Future[Guide]) -> None:
        fp = spec.fingerprint
        try:
            guide = self._compile(spec, vocab)
        except BaseException as e:  # noqa: BLE001 - every waiter gets this same error
            err: BaseException = e
            if not isinstance(e, GuideUnavailable):
                err = GuideUnavailable(f"guide {fp[:16]} failed to build: {e}")
                err.__cause__ = e
            with self._lock:
                self.stats.failures += 1
                self._failed[fp] = (time.monotonic() + self.failure_ttl, err)
                del self._inflight[fp]
            fut.set_exception(err)
            return
        with self._lock:
            self._guides[fp] = guide
            self._guides.move_to_end(fp)
            while len(self._guides) > self.capacity:
                self._guides.popitem(last=False)
                self.stats.evictions += 1
            del self._inflight[fp]
        fut.set_result(guide)

    def _compile(self, spec: GuideSpec, vocab: Vocabulary) -> Guide:
        grammar: Grammar | None = None
        if self.store is not None:
            try:
                grammar = self.store.load(spec)
            except ValueError:
                self.stats.rebuilt_corrupt += 1
            if grammar is not None:
                self.stats.loads += 1
        if grammar is None:
            grammar = spec.build_grammar()
            self.stats.builds += 1
            if self.store is not None and not self.store.write(spec, grammar):
                self.stats.write_failures += 1
        guide = Guide(grammar, vocab, cache=self.cache)
        if self.warm:  # the first step's mask, off the engine thread
            m = guide.matcher()
            m.fill_next_token_bitmask(m.allocate_bitmask())
        return guide

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=False)

    def __enter__(self) -> GuideRegistry:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _done(g: Guide) -> Future[Guide]:
    f: Future[Guide] = Future()
    f.set_result(g)
    return f


def _failed(e: BaseException) -> Future[Guide]:
    f: Future[Guide] = Future()
    f.set_exception(e)
    return f
