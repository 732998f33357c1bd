"""Run the benchmarks: ``python -m bench [--quick] [--only NAME] [--compare OLD.json]``.

Every figure is printed with its median, min and max and its ratio to a baseline measured in the
same run (these machines are noisy; absolute times vary). Results go to ``bench/results/`` as
JSON with the machine and the commit. ``--quick`` (under a minute, no Docker) is what CI runs,
to catch regressions beyond a generous margin: it fails only when a ratio is over twice its bar.
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
from pathlib import Path

from bench.measure import Series

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
#: name -> (module, needs Docker)
BENCHMARKS = {
    "startup": ("bench.startup", False),
    "hello": ("bench.hello", False),
    "protocol": ("bench.protocol", False),
    "echo_mcp": ("bench.echo_mcp", True),
    "stores": ("bench.stores", False),
    "episodes": ("bench.episodes", True),
}
QUICK_MARGIN = 2.0


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


def fmt(seconds: float, unit: str) -> str:
    if unit != "s":
        return f"{seconds:.1f} {unit}"
    if seconds < 0.01:
        return f"{seconds * 1000:.2f} ms"
    return f"{seconds * 1000:.1f} ms" if seconds < 10 else f"{seconds:.1f} s"


def ratios(series: list[Series]) -> dict[str, float]:
    by_name = {s.name: s for s in series}
    out = {}
    for s in series:
        if s.baseline and s.baseline in by_name:
            out[s.name] = s.median / by_name[s.baseline].median
    return out


def print_table(series: list[Series]) -> None:
    ratio = ratios(series)
    rows = [["BENCHMARK", "MEDIAN", "MIN", "MAX", "RATIO", "BAR", "PEAK RSS", "NOTE"]]
    for s in series:
        rows.append([
            s.name,
            fmt(s.median, s.unit),
            fmt(min(s.samples), s.unit),
            fmt(max(s.samples), s.unit),
            f"{ratio[s.name]:.1f}x {s.baseline}" if s.name in ratio else "",
            f"<= {s.bar:g}x" if s.bar else "",
            f"{s.peak_rss_mib:.0f} MiB" if s.peak_rss_mib else "",
            s.note,
        ])
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())


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


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="under a minute, no Docker")
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
    with tempfile.TemporaryDirectory(prefix="agentenv-bench-") as tmp:
        workdir = Path(tmp)
        for name in args.only or list(BENCHMARKS):
            module_name, needs_docker = BENCHMARKS[name]
            if args.quick and needs_docker:
                continue
            print(f"running {name} ...", file=sys.stderr)
            module = importlib.import_module(module_name)
            series.extend(module.run(quick=args.quick, workdir=workdir, agent_env=agent_env))
        if args.reference_venv:
            series.extend(reference(args.reference_venv, workdir))
    print_table(series)
    ratio = ratios(series)
    result = {
        "format_version": 1,
        "created_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "quick": args.quick,
        "machine": machine(),
        "results": [{**s.to_json(), "ratio": ratio.get(s.name)} for s in series],
    }
    if not args.no_save:
        RESULTS.mkdir(parents=True, exist_ok=True)
        stamp = result["created_utc"].replace(":", "").replace("-", "")
        path = RESULTS / f"{stamp}-{result['machine']['commit'] or 'nocommit'}.json"
        path.write_text(json.dumps(result, indent=2) + "\n")
        print(f"\nwrote {path.relative_to(ROOT)}")
    if args.compare:
        compare(result, args.compare)
    over = [s for s in series if s.bar and ratio.get(s.name, 0) > s.bar]
    for s in over:
        print(f"over its bar: {s.name} {ratio[s.name]:.1f}x > {s.bar:g}x", file=sys.stderr)
    if args.quick and any(ratio[s.name] > s.bar * QUICK_MARGIN for s in over):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
