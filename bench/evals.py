"""``agent-env eval run``: 200 trivial local-sandbox runs (``--k 20`` over 10 tasks,
``--max-concurrency 8``) against the same task run one ``agent-env task run`` at a time.

Figures: runs per second of the whole command (start-up, preflight and teardown included) and
the wall time per run, which is what the scheduler costs per run once the runs overlap.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from bench.bars import Bar
from bench.measure import Series, time_command

TASKS, K, CONCURRENCY = 10, 20, 8
EVAL = f"agent-env eval run (k={K} x {TASKS} tasks, concurrency {CONCURRENCY})"
ONE = "agent-env task run (one run, eval baseline)"

#: the evals issue's targets on a 2-core machine
BARS = (
    Bar(EVAL, "runs_per_s", at_least=20, unit="runs/s"),
    Bar(EVAL, "peak_rss_mib", at_most=150, unit="MiB"),
)

HELLO = Path(__file__).resolve().parent.parent / "core/agent_env/bundles/shipped/hello"


def run(*, quick: bool, workdir: Path, agent_env: list[str], smoke: bool = False) -> list[Series]:
    repeat = 1 if smoke else 2 if quick else 5
    env = {"AGENT_ENV_STATE_DIR": str(workdir / "state-evals")}
    time_command([*agent_env, "run", "hello"], repeat=1, env=env)  # stores the greeting
    steps = json.loads((HELLO / "tasks/hello.json").read_text())
    steps[1]["artifact_id"] = "@local/agentenv-framework/hello/greeting"
    task_file, eval_file = workdir / "evals-task.json", workdir / "evals-eval.json"
    task_file.write_text(json.dumps(steps))
    eval_file.write_text(json.dumps([f"t{i}" for i in range(TASKS)]))
    for i in range(TASKS):
        time_command([*agent_env, "task", "create", str(task_file), "--id", f"t{i}"], repeat=1,
                     env=env)
    time_command([*agent_env, "eval", "create", str(eval_file), "--id", "bench"], repeat=1,
                 env=env)
    one, _ = time_command([*agent_env, "task", "run", "--id", "t0"], repeat=repeat, env=env)
    many, rss = time_command([*agent_env, "eval", "run", "--id", "bench", "--k", str(K),
                              "--max-concurrency", str(CONCURRENCY)], repeat=repeat, env=env)
    runs = TASKS * K
    median = statistics.median(many)
    return [
        Series(ONE, one),
        Series(EVAL, many, baseline=ONE, peak_rss_mib=rss,
               note=f"{runs} runs; ratio = the whole eval over one run",
               figures={"runs_per_s": runs / median, "ms_per_run": 1000 * median / runs,
                        "one_run_ms": 1000 * statistics.median(one)}),
    ]
