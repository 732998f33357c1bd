"""``agent-env eval``: evals over stored tasks, run k times each with pass@k.

``eval create`` / ``add-tasks`` / ``get`` manage the versioned eval (an unchanged eval reuses
its version). ``eval run`` runs every task ``--k`` times, at most ``--max-concurrency`` at once,
and prints a table per task (runs, passed, failed, infrastructure errors, mean score, pass@1,
pass@k) and the eval's means. A run that ended in an infrastructure error is retried
(``--retries``, default 1) and, if it still fails, reported as an error: never counted as the
agent's failure, left out of pass@k. The run group id is printed first; ``--resume ID`` reuses
the runs that completed and runs the rest. Exit codes: 0 every run completed (passed or not),
1 a run ended in an error or did not run, 130 / 143 after SIGINT / SIGTERM.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from agent_env.cli.console import echo
from agent_env.cli.params import ENTITY_ID, OUTPUT_DIR, VERSION, run_choices
from agent_env.errors import UserError
from agent_env.runs import DEFAULT_CONCURRENCY
from agent_env.sandbox.chain import option_chain

if TYPE_CHECKING:
    from agent_env.tasks.steps import RunChoices


@click.group("eval")
def eval_group() -> None:
    """Evals over stored tasks: create, add-tasks, get, run (pass@k, resumable)."""


@eval_group.command("create")
@click.argument("file", type=click.Path(path_type=Path, dir_okay=False))
@click.option("--id", "eval_id", type=ENTITY_ID, required=True,
              help="The eval's id.")
def create(file: Path, eval_id: str) -> None:
    """Store FILE (JSON or TOML: the tasks) as the next version of eval ID."""
    from agent_env.evals.entity import put_eval, read_eval_file
    from agent_env.runtime import current

    parsed = read_eval_file(file)
    record, created, reason = put_eval(current().versioned_store, eval_id, parsed.tasks,
                                       parsed.type)
    echo(f"eval {eval_id}: v{record.version} ({reason})" if created
         else f"eval {eval_id}: v{record.version}, unchanged")


@eval_group.command("add-tasks")
@click.argument("file", type=click.Path(path_type=Path, dir_okay=False))
@click.option("--id", "eval_id", type=ENTITY_ID, required=True)
@click.option("--version", type=VERSION, help="The version to add to (default: the latest).")
def add_tasks(file: Path, eval_id: str, version: int | None) -> None:
    """Add FILE's tasks to eval ID, as its next version (tasks already in it are kept once)."""
    from agent_env.evals.entity import get_eval, put_eval, read_eval_file, stored_tasks
    from agent_env.runtime import current

    parsed = read_eval_file(file)
    versioned = current().versioned_store
    base = get_eval(versioned, eval_id, version)
    tasks = stored_tasks(base)
    tasks += [t for t in parsed.tasks if t not in tasks]
    record, created, reason = put_eval(versioned, eval_id, tasks, base.body.get("type"))
    echo(f"eval {eval_id}: v{record.version} ({reason})" if created
         else f"eval {eval_id}: v{record.version}, unchanged")


@eval_group.command("get")
@click.option("--id", "eval_id", type=ENTITY_ID, required=True)
@click.option("--version", type=VERSION, help="A version (default: the latest).")
def get(eval_id: str, version: int | None) -> None:
    """Print a stored eval as JSON."""
    import json

    from agent_env.evals.entity import get_eval
    from agent_env.runtime import current

    record = get_eval(current().versioned_store, eval_id, version)
    echo(json.dumps({"id": record.id, "version": record.version, "type": record.body.get("type"),
                     "tasks": record.body["tasks"],
                     "created_at_utc": record.created_at_utc.isoformat(),
                     "reason": record.reason}, indent=2))


@eval_group.command("run")
@click.option("--id", "eval_id", type=ENTITY_ID, required=True)
@click.option("--version", type=VERSION, help="The eval's version (default: the latest).")
@click.option("--k", type=int, help="Runs per task (default 1); pass@k is computed for it.")
@click.option("--max-concurrency", type=int, default=DEFAULT_CONCURRENCY, show_default=True,
              help="At most this many runs at once.")
@click.option("--retries", type=int, default=1, show_default=True,
              help="Runs again a run that ended in an infrastructure error, up to N times.")
@click.option("--resume", "resume_id", metavar="GROUP",
              help="Continue this run group: completed runs are reused, the rest run.")
@click.option("--output-dir", type=OUTPUT_DIR,
              help="Write runs.jsonl (a row per run) and summary.json here.")
@run_choices()
@click.option("--sandbox", metavar="A[,B...]", help="Sandbox providers (a fallback chain).")
@click.option("--json", "as_json", is_flag=True,
              help="Print the summary and runs as JSON on stdout (progress goes to stderr).")
def run(eval_id: str, version: int | None, k: int | None, max_concurrency: int, retries: int,
        resume_id: str | None, output_dir: Path | None, choices: RunChoices,
        sandbox: str | None, as_json: bool) -> int:
    """Run every task of eval ID k times and report pass@k."""
    from agent_env.evals.entity import get_eval, stored_tasks
    from agent_env.evals.groups import Group, GroupStore, Slot, new_group_id
    from agent_env.runs import check_counts, check_group_size, run_group
    from agent_env.runtime import current

    check_counts(k=k, concurrency=max_concurrency, retries=retries)
    groups = GroupStore(current().document_store)
    versioned = current().versioned_store
    if resume_id is not None:
        group = groups.load(resume_id)
        if group.kind != "eval" or group.subject_id != eval_id:
            raise UserError(f"--resume {resume_id}: that group ran {group.kind} "
                            f"'{group.subject_id}', not eval '{eval_id}'")
        if (k is not None and k != group.k) or (version is not None
                                                and version != group.subject_version):
            raise UserError(f"--resume {resume_id}: the group runs v{group.subject_version} "
                            f"with --k {group.k}; leave --k and --version out to resume it")
    else:
        record = get_eval(versioned, eval_id, version)
        k = k or 1
        pinned = []
        for task in stored_tasks(record):
            stored = versioned.get("tasks", task.task_id, task.task_version)
            if stored is None:
                raise UserError(f"eval {eval_id} v{record.version} names task {task.label}, "
                                "which is not stored (agent-env task create stores it)")
            pinned.append((stored.id, stored.version))
        check_group_size(len(pinned), k)
        slots = tuple(Slot(i * k + s, task_id, task_version, s + 1)
                      for i, (task_id, task_version) in enumerate(pinned) for s in range(k))
        group = Group(new_group_id(), "eval", eval_id, record.version, k, slots)
    return run_group(group, groups, resume=resume_id is not None,
                     max_concurrency=max_concurrency, retries=retries, output_dir=output_dir,
                     choices=choices,
                     sandbox_chain=option_chain(sandbox), as_json=as_json,
                     resume_hint=f"agent-env eval run --id {eval_id} --resume {group.group_id}")


@eval_group.command("report")
@click.option("--id", "eval_id", type=ENTITY_ID,
              help="The eval whose stored runs the leaderboard covers.")
@click.option("--compare", "groups", nargs=2, metavar="A B",
              help="Compare two run groups (eval run prints their ids), paired by task.")
@click.option("--format", "fmt", type=click.Choice(["table", "csv", "json", "md"]),
              default="table", show_default=True)
@click.option("--k", type=click.IntRange(min=1), default=None,
              help="The leaderboard's pass@k (default: the largest k of the eval's runs).")
@click.option("--seed", type=int, default=0, show_default=True,
              help="The comparison's bootstrap seed (the same seed, the same interval).")
@click.option("--resamples", type=click.IntRange(min=100, max=1_000_000), default=10_000,
              show_default=True, help="Bootstrap resamples of the tasks.")
def report(eval_id: str | None, groups: tuple[str, str] | None, fmt: str, k: int | None,
           seed: int, resamples: int) -> None:
    """A leaderboard of an eval's runs (one row per agent x model), or two runs compared
    with a bootstrap confidence interval."""
    from agent_env.evals.compare import (
        compare,
        eval_groups,
        leaderboard,
        render_board,
        render_comparison,
    )
    from agent_env.runtime import current

    if (eval_id is None) == (not groups):
        raise click.UsageError("give --id EVAL (a leaderboard) or --compare A B (two runs)")
    documents = current().document_store
    if groups:
        a, b = groups
        if a == b:
            raise UserError(f"--compare {a} {b}: compare two different run groups")
        result = compare(a, _points(documents, a), b, _points(documents, b), seed=seed,
                         resamples=resamples)
        echo(render_comparison(result, fmt))
        return
    assert eval_id is not None
    found = eval_groups(documents, eval_id)
    if not found:
        raise UserError(f"eval {eval_id} has no stored runs (agent-env eval run --id "
                        f"{eval_id} runs it)")
    points = [p for doc in found for p in _points(documents, str(doc["_id"]))]
    k = k or max(int(doc.get("k") or 1) for doc in found)
    rows = leaderboard(points, k)
    if not rows:
        raise UserError(f"eval {eval_id}: none of its {len(found)} run group(s) has a "
                        "finished run yet")
    echo(render_board(rows, fmt, k))


def _points(documents: Any, group_id: str) -> list[Any]:
    from agent_env.evals.compare import group_counters

    try:
        return group_counters(documents, group_id)
    except UserError:
        raise UserError(f"no run group {group_id} (eval run prints the id when it "
                        "starts)") from None
