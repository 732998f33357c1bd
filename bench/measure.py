"""Timing primitives shared by every benchmark: commands as a user runs them, and coroutines."""

from __future__ import annotations

import contextlib
import os
import statistics
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import attrs


@attrs.define
class Series:
    """Samples of one measurement (seconds, or another ``unit``) and what it is compared to."""

    name: str
    samples: list[float]
    unit: str = "s"
    baseline: str | None = None  # the name of the series this one is divided by
    peak_rss_mib: float | None = None
    note: str = ""
    #: other figures of the run a bar can judge (calls/s, containers leaked, ...)
    figures: dict[str, float] = attrs.field(factory=dict)

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "unit": self.unit,
            "median": self.median,
            "min": min(self.samples),
            "max": max(self.samples),
            "n": len(self.samples),
            "baseline": self.baseline,
            "peak_rss_mib": self.peak_rss_mib,
            "note": self.note,
            "figures": self.figures,
        }


@contextlib.contextmanager
def bytecode_cached() -> Iterator[None]:
    """Commands run inside cache their bytecode, as a user's Python does: with
    ``PYTHONDONTWRITEBYTECODE`` set (as in some sandboxes) every CLI start would compile the
    workspace from source, ~0.15 s no user pays."""
    saved = os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    try:
        yield
    finally:
        if saved is not None:
            os.environ["PYTHONDONTWRITEBYTECODE"] = saved


def fmt(value: float, unit: str) -> str:
    """Seconds in ms (or s past 10 s) with the digits noise leaves meaningful; other units
    with one decimal."""
    if unit != "s":
        return f"{value:.1f} {unit}"
    if value < 0.01:
        return f"{value * 1000:.2f} ms"
    return f"{value * 1000:.1f} ms" if value < 10 else f"{value:.1f} s"


def time_command(
    argv: Sequence[str],
    *,
    repeat: int,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    check: bool = True,
) -> tuple[list[float], float]:
    """Wall times of ``repeat`` runs and the largest peak RSS (MiB) any run reached."""
    times: list[float] = []
    peak = 0.0
    full_env = {**os.environ, **(env or {})}
    for _ in range(repeat):
        start = time.perf_counter()
        process = subprocess.Popen(
            list(argv), env=full_env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        _, status, usage = os.wait4(process.pid, 0)
        times.append(time.perf_counter() - start)
        code = os.waitstatus_to_exitcode(status)
        process.returncode = code
        if check and code != 0:
            stderr = process.stderr.read().decode() if process.stderr else ""
            raise RuntimeError(f"{' '.join(argv)} exited {code}: {stderr[-500:]}")
        if process.stderr:
            process.stderr.close()
        peak = max(peak, usage.ru_maxrss / 1024)  # KiB on Linux
    return times, peak


def time_calls(fn: Callable[[], object], *, repeat: int) -> list[float]:
    """Wall time of ``repeat`` calls of ``fn``."""
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return samples


def resident_mib(container: Any) -> float:
    """A Docker container's resident memory in MiB: its cgroup's usage less the page cache
    (``inactive_file``), as ``docker stats`` counts it."""
    stats = container.stats(stream=False).get("memory_stats") or {}
    usage = stats.get("usage", 0) - (stats.get("stats") or {}).get("inactive_file", 0)
    return float(usage) / 2**20
