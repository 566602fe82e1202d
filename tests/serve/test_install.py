"""`pip install 'grid-sql[vllm]'` resolves (issue #28 §1), and the interface tests run
against the vLLM release the extra allows.

The resolver check asks pip itself (``pip install --dry-run --ignore-installed --report``:
the whole dependency set, resolved from the package index, nothing installed) for the
extra's requirement as ``pyproject.toml`` writes it. It needs the index: marked
``network`` and skipped, with the reason, where PyPI cannot be reached. The other checks
are offline.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path
from urllib.parse import urlparse

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]


def vllm_requirement() -> Requirement:
    py = tomllib.loads((ROOT / "pyproject.toml").read_text())
    (req,) = py["project"]["optional-dependencies"]["vllm"]
    return Requirement(req)


def iface_version() -> Version:
    m = re.search(r"^VLLM_IFACE_VERSION := (\S+)$", (ROOT / "Makefile").read_text(), re.M)
    assert m, "Makefile lost VLLM_IFACE_VERSION"
    return Version(m.group(1))


def test_interface_tests_target_a_version_the_extra_allows() -> None:
    req = vllm_requirement()
    assert req.name == "vllm"
    assert req.specifier.contains(iface_version()), (req, iface_version())
    # the installed interface classes (make vllm-iface) are that version's
    assert Version(metadata.version("vllm")) == iface_version(), (
        "run `make vllm-iface`: tests/serve must run against the tested vLLM release"
    )


def _index_reachable() -> str | None:
    """None when the package index answers a TCP connect, else why not."""
    try:
        out = subprocess.run(
            [sys.executable, "-m", "pip", "config", "get", "global.index-url"],
            capture_output=True,
            text=True,
            timeout=30,
        ).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        out = ""
    host = urlparse(out).hostname if out else "pypi.org"
    try:
        socket.create_connection((host or "pypi.org", 443), timeout=5).close()
    except OSError as e:
        return f"package index {host} unreachable: {e}"
    return None


@pytest.mark.network
def test_vllm_extra_resolves_from_the_index(tmp_path: Path) -> None:
    why = _index_reachable()
    if why:
        pytest.skip(why)
    req = vllm_requirement()
    report = tmp_path / "report.json"
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--dry-run",
            "--ignore-installed",
            "--quiet",
            "--disable-pip-version-check",
            "--report",
            str(report),
            str(req),
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    got = {
        i["metadata"]["name"].lower(): Version(i["metadata"]["version"])
        for i in json.loads(report.read_text())["install"]
    }
    assert req.specifier.contains(got["vllm"]), got["vllm"]
    assert got["vllm"] == iface_version(), "the resolved vLLM is not the one the tests use"
    assert "torch" in got  # the full set was resolved, not vLLM alone
