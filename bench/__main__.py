"""Run the benchmarks: ``python -m bench [--quick | --smoke] [--only NAME] [--compare OLD.json]``.

Every figure is printed with its median, min and max and its ratio to a baseline measured in the
same run (these machines are noisy; absolute times vary). Results go to ``bench/results/`` as
JSON with the machine and the commit.

Every bar a benchmark states (its module's ``BARS``) is judged after the run: the summary at the
end lists each missed bar with what was measured, and the run exits non-zero when a miss is
beyond ``NOISE_MARGIN`` of its bar (or a bar's figure was not produced). ``--quick`` (under a
minute, no Docker) judges the quick benchmarks' bars. ``--smoke`` runs every benchmark once with
the fewest repetitions, so CI catches a broken benchmark in minutes: it judges no bar (one
sample is noise) and saves nothing, but fails when a benchmark raises or produces no figure.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Sequence
from pathlib import Path

from bench.bars import NOISE_MARGIN, Bar, Verdict, judge_all, problems, show
from bench.measure import Series, fmt

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
#: name -> (module, needs Docker)
BENCHMARKS = {
    "startup": ("bench.startup", False),
    "hello": ("bench.hello", False),
    "protocol": ("bench.protocol", False),
    "echo_mcp": ("bench.echo_mcp", True),
    "multi_env": ("bench.multi_env", True),
    "env_snapshot": ("bench.env_snapshot", True),
    "website": ("bench.website", True),
    "stores": ("bench.stores", False),
    "episodes": ("bench.episodes", True),
    "evals": ("bench.evals", False),
    "coding_agents": ("bench.coding_agents", True),
    "agents": ("bench.agents", True),
    "ray_runner": ("bench.ray_runner", True),
    "forks": ("bench.forks", True),
    "trainers": ("bench.trainers", True),
    "explorer": ("bench.explorer", False),
}
FORMAT_VERSION = 2  # 2: bars judged per run ("bars"), "figures" per series, no per-series "bar"


def machine() -> dict:
    memory_kib = 0
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                memory_kib = int(line.split()[1])
    except OSError:
        pass
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT
    ).stdout.strip()
    return {
        "cores": os.cpu_count(),
        "memory_gib": round(memory_kib / 1024 / 1024, 1),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "commit": commit or None,
    }


def ratios(series: list[Series]) -> dict[str, float]:
    by_name = {s.name: s for s in series}
    out = {}
    for s in series:
        if s.baseline and s.baseline in by_name:
            out[s.name] = s.median / by_name[s.baseline].median
    return out


def print_table(series: Sequence[Series], bars: Sequence[Bar] = ()) -> None:
    ratio = ratios(series)
    bar_text: dict[str, list[str]] = {}
    for bar in bars:
        bar_text.setdefault(bar.series, []).append(bar.text())
    rows = [["BENCHMARK", "MEDIAN", "MIN", "MAX", "RATIO", "BAR", "PEAK RSS", "NOTE"]]
    for s in series:
        rows.append([
            s.name,
            fmt(s.median, s.unit),
            fmt(min(s.samples), s.unit),
            fmt(max(s.samples), s.unit),
            f"{ratio[s.name]:.1f}x {s.baseline}" if s.name in ratio else "",
            ", ".join(bar_text.get(s.name, [])),
            f"{s.peak_rss_mib:.0f} MiB" if s.peak_rss_mib else "",
            s.note,
        ])
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())


def report_bars(verdicts: Sequence[Verdict]) -> list[Verdict]:
    """Print every bar with what was measured for it (the misses first), in one table;
    return the verdicts that fail."""
    counts = {status: sum(v.status == status for v in verdicts)
              for status in ("met", "missed", "missed (within noise)", "no figure")}
    print(f"\nBars: {len(verdicts)} judged, " + ", ".join(
        f"{n} {status}" for status, n in counts.items() if n or status == "met")
        + f" (noise margin {NOISE_MARGIN:.0%} of the bar)")
    rows = [["VERDICT", "SERIES", "MEASURED", "BAR", "OFF BY"]]
    for v in sorted(verdicts, key=lambda v: v.status == "met"):  # stable: misses first
        measured = "-" if v.measured is None else show(v.measured, v.bar.unit)
        if v.bar.figure not in ("ratio", "median") and v.measured is not None:
            measured = f"{v.bar.figure} {measured}"
        rows.append([v.status, v.bar.series, measured, v.bar.text(), v.off_by()])
    if len(rows) > 1:
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        for row in rows:
            print("  " + "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
    return [v for v in verdicts if v.failed]


def compare(current: dict, old_path: Path) -> None:
    old = json.loads(old_path.read_text())
    before = {r["name"]: r for r in old["results"]}
    print(f"\nChange against {old_path.name} (commit {old['machine'].get('commit')}):")
    for row in current["results"]:
        prior = before.get(row["name"])
        if prior:
            change = (row["median"] / prior["median"] - 1) * 100
            print(f"  {row['name']}: {fmt(prior['median'], row['unit'])} -> "
                  f"{fmt(row['median'], row['unit'])} ({change:+.0f}%)")


def reference(venv: Path, workdir: Path) -> list[Series]:
    from bench.measure import time_command

    command = [str(venv / "bin" / "agent-env")]
    env = {"XDG_STATE_HOME": str(workdir / "ref-state")}
    version, _ = time_command([*command, "--version"], repeat=5, env=env)
    time_command([*command, "run", "hello"], repeat=1, env=env)
    hello, rss = time_command([*command, "run", "hello"], repeat=5, env=env)
    return [
        Series("reference agent-env --version", version, baseline="agent-env --version"),
        Series("reference agent-env run hello", hello, baseline="agent-env run hello",
               peak_rss_mib=rss),
    ]


def run_one(name: str, args: argparse.Namespace, workdir: Path,
            agent_env: list[str]) -> tuple[list[Series], tuple[Bar, ...], list[str]]:
    """One benchmark's series, its bars and what went wrong; a benchmark that raises is
    reported and the others still run, so one run shows every broken benchmark."""
    module_name, _ = BENCHMARKS[name]
    started = time.perf_counter()
    print(f"running {name} ...", file=sys.stderr, flush=True)
    try:
        module = importlib.import_module(module_name)
        bars: tuple[Bar, ...] = tuple(getattr(module, "BARS", ()))
        series = list(module.run(quick=args.quick, workdir=workdir, agent_env=agent_env,
                                 smoke=args.smoke))
    except Exception as error:
        traceback.print_exc()
        return [], (), [f"raised {type(error).__name__}: {error}"]
    finally:
        print(f"  {name}: {time.perf_counter() - started:.1f}s", file=sys.stderr, flush=True)
    return series, bars, problems(series)


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="under a minute, no Docker")
    parser.add_argument("--smoke", action="store_true",
                        help="every benchmark once, fewest repetitions; no bar judged, nothing "
                        "saved; fails when a benchmark raises or produces no figure")
    parser.add_argument("--only", action="append", choices=sorted(BENCHMARKS))
    parser.add_argument("--compare", type=Path, metavar="OLD.json")
    parser.add_argument("--reference-venv", type=Path, metavar="PATH")
    parser.add_argument("--no-save", action="store_true")
    args = parser.parse_args()

    agent_env = [sys.executable, "-m", "agent_env"]
    venv_command = Path(sys.executable).parent / "agent-env"
    if venv_command.exists():
        agent_env = [str(venv_command)]
    series: list[Series] = []
    bars: list[Bar] = []
    broken: dict[str, list[str]] = {}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="agentenv-bench-") as tmp:
        workdir = Path(tmp)
        for name in args.only or list(BENCHMARKS):
            if args.quick and BENCHMARKS[name][1]:
                continue
            found, declared, wrong = run_one(name, args, workdir, agent_env)
            series.extend(found)
            bars.extend(declared)
            if wrong:
                broken[name] = wrong
        if args.reference_venv:
            try:
                series.extend(reference(args.reference_venv, workdir))
            except Exception as error:
                traceback.print_exc()
                broken["reference"] = [f"raised {type(error).__name__}: {error}"]
    took = time.perf_counter() - started
    print_table(series, bars)
    ratio = ratios(series)
    result = {
        "format_version": FORMAT_VERSION,
        "created_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "quick": args.quick,
        "machine": machine(),
        "results": [{**s.to_json(), "ratio": ratio.get(s.name)} for s in series],
    }
    if args.compare:
        compare(result, args.compare)
    failing: list[Verdict] = []
    if args.smoke:
        # Not judged, but a bar whose series ran must find its figure (a renamed key would
        # otherwise surface only in a full run).
        present = {s.name for s in series}
        for verdict in judge_all([b for b in bars if b.series in present], series):
            if verdict.status == "no figure":
                broken.setdefault("bars", []).append(
                    f"{verdict.bar.series} {verdict.bar.text()}: figure not produced")
        print(f"\nSmoke run ({took:.0f}s): {len(bars)} bars not judged (one sample is noise).")
    else:
        verdicts = judge_all(bars, series)
        result["bars"] = [v.to_json() for v in verdicts]
        failing = report_bars(verdicts)
    if not args.no_save and not args.smoke and not broken:
        RESULTS.mkdir(parents=True, exist_ok=True)
        stamp = result["created_utc"].replace(":", "").replace("-", "")
        path = RESULTS / f"{stamp}-{result['machine']['commit'] or 'nocommit'}.json"
        path.write_text(json.dumps(result, indent=2) + "\n")
        print(f"\nwrote {path.relative_to(ROOT)}")
    for name, wrong in broken.items():
        for line in wrong:
            print(f"BROKEN benchmark {name}: {line}", file=sys.stderr)
    for verdict in failing:
        print(f"FAILED bar: {verdict.bar.series} {verdict.bar.text()}: "
              f"{verdict.status}", file=sys.stderr)
    return 1 if broken or failing else 0


if __name__ == "__main__":
    sys.exit(main())
