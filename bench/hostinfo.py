"""What every benchmark report says about its host: the CPU model (one helper instead of the
same ``/proc/cpuinfo`` loop in each script)."""

from __future__ import annotations

from pathlib import Path


def cpu_model(default: str = "?") -> str:
    """The first ``model name`` of ``/proc/cpuinfo``, or ``default`` where there is none."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return default
