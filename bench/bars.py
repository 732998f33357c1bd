"""Bars: the targets a benchmark's figures must meet, as data, judged after every run.

A bar that is only printed gets missed unnoticed, so each benchmark module declares its bars
(``BARS``, next to the code that measures them) and ``python -m bench`` compares every one with
what was measured, lists the misses at the end and exits non-zero on a miss beyond
``NOISE_MARGIN``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Literal

import attrs

from bench.measure import Series, fmt

#: How far past its bar a figure may land and still count as noise (relative to the bar):
#: 2-core machines shared with other work move medians by about this much from run to run.
#: A miss within it is reported but does not fail the run; a bar of 0 has no room for noise.
NOISE_MARGIN = 0.10

Status = Literal["met", "missed (within noise)", "missed", "no figure"]


@attrs.frozen
class Bar:
    """One figure of one series must stay at most (or at least) ``limit``.

    ``figure`` is ``"ratio"`` (the series' median over its baseline's), ``"median"`` (in the
    series' unit), ``"peak_rss_mib"``, or a key of the series' ``figures``.
    """

    series: str
    figure: str = "ratio"
    at_most: float | None = attrs.field(default=None, kw_only=True)
    at_least: float | None = attrs.field(default=None, kw_only=True)
    unit: str = attrs.field(default="x", kw_only=True)

    def __attrs_post_init__(self) -> None:
        # A bar is a ceiling or a floor; both or neither is a typo in a BARS list.
        if (self.at_most is None) == (self.at_least is None):
            raise ValueError(f"bar on {self.series!r}: give exactly one of at_most, at_least")

    @property
    def limit(self) -> float:
        limit = self.at_most if self.at_most is not None else self.at_least
        assert limit is not None  # __attrs_post_init__ saw to it
        return limit

    @property
    def op(self) -> str:
        return "<=" if self.at_most is not None else ">="

    def text(self) -> str:
        """``<= 3x``, ``peak_rss_mib <= 60 MiB``, ``of_direct >= 0.5``: the bar as printed."""
        if self.unit == "s":
            limit = fmt(self.limit, "s")
        elif self.unit == "x":
            limit = f"{self.limit:g}x"
        else:
            limit = f"{self.limit:g} {self.unit}".rstrip()
        which = "" if self.figure in ("ratio", "median") else f"{self.figure} "
        return f"{which}{self.op} {limit}"

    def to_json(self) -> dict[str, object]:
        return attrs.asdict(self)


def show(value: float, unit: str) -> str:
    """A measured figure in its bar's unit, with the digits noise leaves meaningful."""
    if unit == "s":
        return fmt(value, "s")
    if unit == "x":
        return f"{value:.2f}x" if value < 10 else f"{value:.1f}x"
    number = f"{value:.0f}" if value == int(value) or abs(value) >= 10 else f"{value:.2f}"
    return f"{number} {unit}".rstrip()


@attrs.frozen
class Verdict:
    """A bar and what the run measured for it (``None``: the figure was not produced)."""

    bar: Bar
    measured: float | None
    status: Status

    @property
    def failed(self) -> bool:
        """A miss beyond the noise margin, or a bar nothing measured, fails the run."""
        return self.status in ("missed", "no figure")

    def off_by(self) -> str:
        """How far past the bar, in percent of it (``""`` when met or unmeasured)."""
        if self.measured is None or self.status == "met" or self.bar.limit == 0:
            return ""
        return f"{(self.measured / self.bar.limit - 1) * 100:+.0f}%"

    def to_json(self) -> dict[str, object]:
        return {"bar": self.bar.to_json(), "measured": self.measured, "status": self.status}


def figure(series: Series, name: str, by_name: dict[str, Series]) -> float | None:
    """The named figure of ``series``; ``None`` when the run did not produce it."""
    if name == "ratio":
        base = by_name.get(series.baseline) if series.baseline else None
        return series.median / base.median if base is not None and base.median else None
    if name == "median":
        return series.median
    if name == "peak_rss_mib":
        return series.peak_rss_mib
    return series.figures.get(name)


def judge(bar: Bar, measured: float | None, margin: float = NOISE_MARGIN) -> Verdict:
    """Met, missed within ``margin`` of the bar (noise), missed, or not measured at all."""
    if measured is None or math.isnan(measured):
        return Verdict(bar, None, "no figure")
    if bar.at_most is not None:
        met, noise = measured <= bar.at_most, measured <= bar.at_most * (1 + margin)
    else:
        assert bar.at_least is not None
        met, noise = measured >= bar.at_least, measured >= bar.at_least * (1 - margin)
    return Verdict(bar, measured, "met" if met else "missed (within noise)" if noise else "missed")


def judge_all(bars: Iterable[Bar], series: Sequence[Series],
              margin: float = NOISE_MARGIN) -> list[Verdict]:
    """Every bar against this run's series; a bar whose series is absent is ``no figure``."""
    by_name = {s.name: s for s in series}
    verdicts = []
    for bar in bars:
        measured = by_name.get(bar.series)
        verdicts.append(judge(bar, figure(measured, bar.figure, by_name) if measured else None,
                              margin))
    return verdicts


def problems(series: Sequence[Series]) -> list[str]:
    """What makes a benchmark's output unusable: no series, no or non-finite samples, a
    baseline that is not in the run. Checked in every mode, smoke included."""
    if not series:
        return ["produced no figure"]
    names = {s.name for s in series}
    found = []
    for s in series:
        if not s.samples:
            found.append(f"{s.name}: no samples")
        elif not all(math.isfinite(x) for x in s.samples):
            found.append(f"{s.name}: non-finite samples {s.samples}")
        if s.baseline and s.baseline not in names:
            found.append(f"{s.name}: its baseline {s.baseline!r} was not measured")
        for key, value in s.figures.items():
            if not math.isfinite(value):
                found.append(f"{s.name}: figure {key} is {value}")
    return found
