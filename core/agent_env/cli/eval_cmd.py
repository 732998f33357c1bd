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

import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from agent_env.cli.console import echo
from agent_env.cli.params import ENTITY_ID, OUTPUT_DIR, VERSION
from agent_env.errors import UserError
from agent_env.sandbox.chain import option_chain

if TYPE_CHECKING:
    from agent_env.evals.groups import Group, Slot
    from agent_env.tasks.session import RunRequest
    from agent_env.tasks.steps import RunChoices

EXIT_OK, EXIT_FAILED, EXIT_SIGINT, EXIT_SIGTERM = 0, 1, 130, 143
DEFAULT_CONCURRENCY = 4




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
    from agent_env.runtime import versioned_store

    parsed = read_eval_file(file)
    record, created, reason = put_eval(versioned_store(), eval_id, parsed.tasks, parsed.type)
    echo(f"eval {eval_id}: v{record.version} ({reason})" if created
         else f"eval {eval_id}: v{record.version}, unchanged")


@eval_group.command("add-tasks")
@click.argument("file", type=click.Path(path_type=Path, dir_okay=False))
@click.option("--id", "eval_id", type=ENTITY_ID, required=True)
@click.option("--version", type=VERSION, help="The version to add to (default: the latest).")
def add_tasks(file: Path, eval_id: str, version: int | None) -> None:
    """Add FILE's tasks to eval ID, as its next version (tasks already in it are kept once)."""
    from agent_env.evals.entity import get_eval, put_eval, read_eval_file, stored_tasks
    from agent_env.runtime import versioned_store

    parsed = read_eval_file(file)
    versioned = versioned_store()
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
    from agent_env.runtime import versioned_store

    record = get_eval(versioned_store(), eval_id, version)
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
@click.option("--model", "--agent-model", "model", metavar="NAME",
              help="The model every prompt_agent step asks for.")
@click.option("--agent", "agent_id", type=ENTITY_ID, metavar="ID",
              help="The agent every deploy_agent deploys.")
@click.option("--judge-model", metavar="NAME",
              help="The model rubrics_verifier steps ask when they name none.")
@click.option("--sandbox", metavar="A[,B...]", help="Sandbox providers (a fallback chain).")
@click.option("--json", "as_json", is_flag=True,
              help="Print the summary and runs as JSON on stdout (progress goes to stderr).")
def run(eval_id: str, version: int | None, k: int | None, max_concurrency: int, retries: int,
        resume_id: str | None, output_dir: Path | None, model: str | None,
        agent_id: str | None, judge_model: str | None, sandbox: str | None,
        as_json: bool) -> int:
    """Run every task of eval ID k times and report pass@k."""
    from agent_env.evals.entity import get_eval, stored_tasks
    from agent_env.evals.groups import Group, GroupStore, Slot, new_group_id
    from agent_env.runtime import document_store, versioned_store

    check_counts(k=k, concurrency=max_concurrency, retries=retries)
    groups = GroupStore(document_store())
    versioned = versioned_store()
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
                     model=model, agent_id=agent_id, sandbox=sandbox, as_json=as_json,
                     resume_hint=f"agent-env eval run --id {eval_id} --resume {group.group_id}",
                     judge_model=judge_model)


#: The most runs of one task a group holds (a group's slots are stored: a k of a billion
#: would fill memory and the document store before the first run started).
MAX_K = 10_000
#: The most runs one group holds, all tasks together.
MAX_RUNS = 100_000
MAX_RETRIES = 100


def check_counts(*, k: int | None = None, concurrency: int = 1, retries: int = 0,
                 concurrency_option: str = "--max-concurrency") -> None:
    if k is not None and k < 1:
        raise UserError(f"--k {k}: give at least 1 run per task")
    if k is not None and k > MAX_K:
        raise UserError(f"--k {k}: at most {MAX_K:,} runs per task in one group (run more "
                        "groups, each with its own --k)")
    if concurrency < 1:
        raise UserError(f"{concurrency_option} {concurrency}: give at least 1 run at a time")
    if retries < 0 or retries > MAX_RETRIES:
        raise UserError(f"--retries {retries}: give 0 to {MAX_RETRIES}")


def check_group_size(tasks: int, k: int) -> None:
    """Refuse a group of more than :data:`MAX_RUNS` runs before a slot of it is made."""
    if tasks * k > MAX_RUNS:
        raise UserError(f"{tasks} tasks x --k {k} = {tasks * k:,} runs: at most {MAX_RUNS:,} "
                        "in one group (split the eval, or lower --k)")


def parse_seeds(text: str) -> list[int]:
    """``--seeds 1,2,3``: integers, each once."""
    seeds: list[int] = []
    for part in text.split(","):
        item = part.strip()
        try:
            seed = int(item)
        except ValueError:
            raise UserError(f"--seeds {text}: {item!r} is not an integer (give e.g. 1,2,3)") \
                from None
        if seed in seeds:
            raise UserError(f"--seeds {text}: {seed} is listed twice")
        seeds.append(seed)
    return seeds


# -- running a group ------------------------------------------------------------------------------


def _requests(group: Group, sandbox: str | None, choices: RunChoices,
              overrides: Mapping[str, str]) -> Callable[[Slot], RunRequest]:
    """Preflight every task version the group runs (all problems in one error), check what
    they need (``Step.needs``), then a builder of each slot's request."""
    import attrs

    from agent_env.bundles.entities import stored_artifacts, stored_task
    from agent_env.bundles.plan import PreflightFailed, preflight_stored
    from agent_env.cli.run_cmd import check_needs
    from agent_env.runtime import versioned_store
    from agent_env.tasks.plan import TaskSpec
    from agent_env.tasks.session import RunRequest

    specs: dict[tuple[str, int], TaskSpec] = {}
    checked: list[tuple[str, Any]] = []
    problems: list[str] = []
    for slot in group.slots:
        key = (slot.task_id, slot.task_version)
        if key in specs:
            continue
        record = stored_task(versioned_store(), slot.task_id, slot.task_version)
        label = f"{record.id} v{record.version}"
        try:
            steps, built = preflight_stored(label, record.body["steps"],
                                            sandbox_chain=option_chain(sandbox))
            checked.append((label, built))
        except PreflightFailed as exc:
            problems += exc.problems
            steps = []
        specs[key] = TaskSpec(record.id, record.id, tuple(steps), record.version)
    if problems:
        raise PreflightFailed(f"{group.kind} {group.subject_id}", problems)
    check_needs(checked, choices)
    artifacts = stored_artifacts()

    def build(slot: Slot) -> RunRequest:
        spec = attrs.evolve(specs[(slot.task_id, slot.task_version)],
                            label=f"{slot.task_id} #{slot.sample}")
        metadata: dict[str, Any] = dict(overrides)
        # which group (and eval) the run belongs to: its record says so, the explorer filters
        metadata["run_group_id"] = group.group_id
        if group.kind == "eval":
            metadata["eval_id"] = group.subject_id
        return RunRequest(spec, artifacts, metadata, choices,
                          dict(slot.seed) if slot.seed else None)

    return build


def run_group(group: Group, groups: Any, *, resume: bool, max_concurrency: int, retries: int,
              output_dir: Path | None, model: str | None, agent_id: str | None,
              sandbox: str | None, as_json: bool, resume_hint: str | None,
              judge_model: str | None = None) -> int:
    """Preflight, record the group, run its slots, print the table; returns the exit code."""
    import contextlib
    import json

    from agent_env.cli.run_cmd import check_sandbox_chain
    from agent_env.tasks.steps import RunChoices

    chain = option_chain(sandbox)
    if chain:
        check_sandbox_chain(chain)
    overrides = {"judge_model": judge_model} if judge_model else {}
    build = _requests(group, sandbox, RunChoices(model=model, agent=agent_id), overrides)
    from agent_env.evals.execute import Executor
    from agent_env.runners import RunnerContext, open_runner
    from agent_env.runtime import document_store
    from agent_env.tasks.records import StoredInstances

    instances = StoredInstances(document_store())
    runner = open_runner(RunnerContext(instances, sandbox_chain=chain))
    executor = Executor(group, groups, runner, build,
                        instances, max_concurrency=max_concurrency, retries=retries,
                        progress=None)
    if resume:
        executor.check_resume()
    else:
        groups.create(group)
    out = sys.stdout
    with contextlib.redirect_stdout(sys.stderr) if as_json else contextlib.nullcontext():
        document, runs = _run_and_report(group, executor, output_dir, resume_hint)
    if as_json:
        from agent_env.evals.report import run_row

        out.write(json.dumps({**document, "runs": [run_row(r) for r in runs]}, indent=2,
                             default=str) + "\n")
    return int(document["exit_code"])


def _run_and_report(group: Group, executor: Any, output_dir: Path | None,
                    resume_hint: str | None) -> tuple[Any, Any]:
    import asyncio

    from agent_env.cli.run_cmd import count_line
    from agent_env.evals.execute import LiveProgress, PlainProgress
    from agent_env.evals.report import summarise, summary_document, table_lines, write_output_dir
    from agent_env.plural import plural

    label = f"{group.kind} {group.subject_id}" + (
        f" v{group.subject_version}" if group.subject_version else "")
    echo(f"Run group {group.group_id}: {label}, {plural(len(group.slots), 'run')}"
         + (f" (resume: {resume_hint})" if resume_hint else ""))
    live = sys.stdout.isatty() and _term_ok()
    progress = (LiveProgress(len(group.slots), echo, sys.stdout) if live
                else PlainProgress(len(group.slots), echo))
    executor.progress = progress
    code = asyncio.run(_drive(executor, progress))
    outcome = executor.outcome
    runs = outcome.runs
    echo()
    echo("Results:")
    for line in table_lines(group, summarise(group, runs)):
        echo(line)
    if runs:
        echo(f"  {count_line([r.result for r in runs])}")
    missing = outcome.not_run
    if outcome.busy:
        echo(f"  {plural(outcome.busy, 'run')} made by another process resuming this group")
    if code is None:
        from agent_env.tasks.scores import COMPLETED

        complete = not missing and all(r.outcome in COMPLETED for r in runs)
        code = EXIT_OK if complete else EXIT_FAILED
    document = summary_document(group, runs, code, missing)
    if output_dir is not None:
        write_output_dir(output_dir, group, runs, document, echo)
    if outcome.torn_down:
        echo(f"Tore down {', '.join(plural(n, kind) for kind, n in outcome.torn_down.items())}.")
    for failed in outcome.teardown_failed:
        echo(f"Could not tear down {failed}", err=True)
    if code in (EXIT_SIGINT, EXIT_SIGTERM):
        echo(f"Interrupted: {len(runs)} of {len(group.slots)} runs done"
             + (f"; resume with: {resume_hint}" if resume_hint else ""), err=True)
    return document, runs


def _term_ok() -> bool:
    import os

    return os.environ.get("TERM") != "dumb"


async def _drive(executor: Any, progress: Any) -> int | None:
    """Run the executor with signals handled: the first stops the runs (they are cancelled,
    torn down and released for a resume), a second stops waiting for their teardown."""
    import asyncio
    import signal

    loop = asyncio.get_running_loop()
    main = asyncio.current_task()
    state: dict[str, int | None] = {"code": None}
    names = {signal.SIGINT: ("Ctrl-C", EXIT_SIGINT), signal.SIGTERM: ("SIGTERM", EXIT_SIGTERM)}

    def on_signal(signum: int) -> None:
        reason, code = names[signal.Signals(signum)]
        if state["code"] is None:
            state["code"] = code
            echo(f"cancelled by {reason}; stopping the runs and tearing down (again to stop "
                 "the teardown)", err=True)
            executor.stop(reason)
        elif main is not None:
            main.cancel()

    for signum in names:
        loop.add_signal_handler(signum, on_signal, signum)
    try:
        await executor.run()
    except asyncio.CancelledError:
        echo("Teardown stopped; some sandboxes may still be up (agent-env gc removes them)",
             err=True)
    finally:
        progress.close()
        for signum in names:
            loop.remove_signal_handler(signum)
    return state["code"]
