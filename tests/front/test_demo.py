"""``grid-sql demo``: the model-free mask walk, and the model demo on the packaged Chinook."""

from __future__ import annotations

import io
import os

import pytest

from grid_sql.data import CHINOOK_SHA256, chinook_path
from grid_sql.front import demo


def test_packaged_chinook_is_the_verified_file():
    import hashlib

    assert hashlib.sha256(chinook_path().read_bytes()).hexdigest() == CHINOOK_SHA256
    assert chinook_path().with_name("LICENSE-Chinook.md").is_file()


def test_masks_walk_blocks_every_probe(shared_data, capsys):
    vocab = shared_data / "tokenizers" / "ggml-vocab-qwen2.gguf"
    assert demo.masks_run(chinook_path(), vocab) == 0
    out = capsys.readouterr().out
    assert "complete sentence: True" in out
    assert out.count("blocked at") == len(demo.PROBES)


@pytest.mark.slow  # Chinook's schema prompt on CPU: ~30-60 s on a busy 2-core host
def test_demo_with_smollm2(tmp_path):
    from grid_sql.decode.models import cached_path

    if not cached_path("smollm2-135m").is_file():
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("smollm2-135m is not cached (make models)")
        pytest.skip("smollm2-135m is not cached (make models)")
    out = io.StringIO()
    code = demo.run(
        model="smollm2-135m",
        questions=["How many albums are there?"],
        audit=tmp_path / "audit.sqlite",
        out=out,
    )
    text = out.getvalue()
    assert "Q: How many albums are there?" in text
    # either the answer with its audit id, or a typed refusal (the 135M model is weak at SQL)
    assert ("SQL: " in text and "audit " in text) or "refused (" in text
    assert text.count("blocked at") == len(demo.PROBES) and "ALLOWED" not in text
    assert "error (" not in text and code == 0
    assert "1/1 answered" in text or "1 refused" in text
