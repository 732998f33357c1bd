"""``agent-env run [BUNDLE]``: list installed bundles, or run a bundle's evals or tasks.

Output: one ledger line per entity, progress lines per step, a ``Tasks:``
(and ``Evals:``) summary, then what teardown did, last. Beyond the reference: with more than
one run, or any run that infrastructure failed, a count line keeps ``error`` (infrastructure,
not scored) apart from ``failed``; ``--json`` prints the runs and counts on stdout. Exit codes:
0 all passed (or unscored), 1 a run failed, scored below 1 or ended in error, 130 / 143 after
SIGINT / SIGTERM. The first signal cancels the
runs and tears down; a second stops the teardown and lists what is still up.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import click

from agent_env.cli.console import echo
from agent_env.cli.params import ENTITY_ID
from agent_env.cli.progress import seconds
from agent_env.plural import plural
from agent_env.sandbox.chain import option_chain, split_chain

if TYPE_CHECKING:
    from agent_env.tasks.engine import TaskResult
    from agent_env.tasks.session import RunRequest
    from agent_env.tasks.steps import RunChoices
    from agent_env.tasks.teardown import Teardown

EXIT_OK, EXIT_FAILED, EXIT_SIGINT, EXIT_SIGTERM = 0, 1, 130, 143
LISTING_FOOTER = "Run one with agent-env run NAME. To change one, copy its folder and run the copy."




# -- the listing --------------------------------------------------------------------------------


def print_listing() -> None:
    import shutil

    from agent_env.bundles.find import installed_bundles
    from agent_env.bundles.parse import parse_bundle, read_description

    bundles = installed_bundles()
    if not bundles:
        echo("No bundles are installed. Run a bundle folder with agent-env run PATH.")
        return
    rows = []
    for bundle in bundles:
        try:
            parsed, _ = parse_bundle(bundle.path, bundle.id_root)
            contents, description = parsed.contents(), parsed.description
        except Exception:
            contents, description = "?", read_description(bundle.path)
        rows.append((bundle, f"{bundle.distribution} {bundle.version}", contents, description))
    name_w = max(4, *(len(b.name) for b, *_ in rows))
    package_w = max(7, *(len(p) for _, p, *_ in rows))
    contents_w = max(8, *(len(c) for *_, c, _ in rows))
    width = max(100, shutil.get_terminal_size((100, 24)).columns)
    echo(f"{'NAME':<{name_w}}  {'PACKAGE':<{package_w}}  {'CONTENTS':<{contents_w}}  DESCRIPTION")
    indent = " " * (name_w + 2)
    for bundle, package, contents, description in rows:
        line = f"{bundle.name:<{name_w}}  {package:<{package_w}}  {contents:<{contents_w}}  "
        room = width - len(line)
        if len(description) > room:
            description = description[: max(room - 4, 10)].rstrip() + " ..."
        echo(line + description)
        echo(indent + str(bundle.path))
        if bundle.aliases:
            echo(indent + "aliases: " + ", ".join(bundle.aliases))
    echo()
    echo(LISTING_FOOTER)


def task_line(result: TaskResult) -> str:
    version = f" v{result.task.version}" if result.task.version else ""
    return (f"  {result.task.label}{version}: {result.describe()}, "
            f"{seconds(result.duration_seconds)}, instance {result.instance_id}")


def is_success(result: TaskResult) -> bool:
    from agent_env.tasks import scores  # not at CLI start: run_cmd is imported for --help

    return result.outcome in scores.SUCCESS


#: How the count line names each outcome, in the order it lists them.
OUTCOME_WORDS = (("passed", "passed"), ("unscored", "unscored"),
                 ("scored below 1", "scored below 1"), ("failed", "failed"),
                 ("error", "infrastructure error (not scored)"), ("cancelled", "cancelled"))


def count_line(results: Sequence[TaskResult]) -> str:
    """``3 runs: 1 passed, 1 failed, 1 infrastructure error (not scored)``: an error is counted
    apart from a failure, so an outage never reads as an agent that scored 0."""
    parts = []
    for outcome, words in OUTCOME_WORDS:
        count = sum(1 for r in results if r.outcome == outcome)
        if count:
            parts.append(f"{count} {words}")
    return f"{plural(len(results), 'run')}: {', '.join(parts)}"


def run_json(result: TaskResult) -> dict[str, Any]:
    """One run as ``--json`` prints it."""
    from agent_env.tasks import scores

    fatal = result.first_fatal
    return {
        "task": result.task.label, "task_id": result.task.id, "version": result.task.version,
        "instance_id": result.instance_id, "outcome": result.outcome,
        "error_kind": ("infra" if result.outcome == scores.ERROR else "task"
                       if result.outcome == scores.FAILED else None),
        "error": fatal.summary if fatal is not None and result.outcome in (
            "failed", "error") else None,
        "failed_step": fatal.step_id if fatal is not None and result.outcome in (
            "failed", "error") else None,
        "scores": dict(result.scores), "duration_seconds": round(result.duration_seconds, 3),
    }


def summary_json(results: Sequence[TaskResult]) -> dict[str, Any]:
    counts = {outcome: sum(1 for r in results if r.outcome == outcome)
              for outcome, _ in OUTCOME_WORDS}
    return {"runs": len(results), **{k.replace(" ", "_"): v for k, v in counts.items()},
            "errors": counts["error"]}


def endpoint_lines(endpoints: Sequence[Any]) -> list[str]:
    """What ``--keep`` holds up, to use while it waits: each URL with its bearer token."""
    return [f"  {e.label}: {e.url}" + (f"  (Authorization: Bearer {e.token})" if e.token else "")
            for e in endpoints]


# -- running --------------------------------------------------------------------------------------


def teardown_summary(teardown: Teardown, stopped: bool) -> None:
    report = teardown.report()
    counts: dict[str, int] = {}
    for item in report.terminated:
        counts[item.kind] = counts.get(item.kind, 0) + 1
    for item in report.failed:
        if item.error and not stopped:
            echo(f"Could not tear down {item.label}: {item.error}", err=True)
    if stopped and report.failed:
        echo("Teardown stopped; still up:", err=True)
        for item in report.failed:
            echo(f"  {item.label}", err=True)
    if counts:
        echo(f"Tore down {', '.join(plural(n, kind) for kind, n in counts.items())}.")
    elif report.failed and not stopped:
        echo(f"Could not tear down {plural(len(report.failed), 'thing')}.")


def execute(
    requests: Sequence[RunRequest],
    *,
    keep: bool = False,
    sandbox_chain: Sequence[str] | None = None,
    eval_lines: Any = None,
) -> tuple[list[TaskResult], int]:
    """Run ``requests``, print progress and the summary, tear down; returns (results, code)."""
    import asyncio

    return asyncio.run(_execute(requests, keep, sandbox_chain, eval_lines))


async def _execute(
    requests: Sequence[RunRequest], keep: bool, sandbox_chain: Sequence[str] | None,
    eval_lines: Any,
) -> tuple[list[TaskResult], int]:
    import asyncio
    import contextlib
    import signal

    from agent_env.cli.progress import progress_for_stdout
    from agent_env.cli.reporter import reporting
    from agent_env.runtime import document_store
    from agent_env.tasks import scores
    from agent_env.tasks.records import StoredInstances
    from agent_env.tasks.session import Session

    session = Session(instances=StoredInstances(document_store()), sandbox_chain=sandbox_chain)
    loop = asyncio.get_running_loop()
    state: dict[str, Any] = {"signals": 0, "code": None, "teardown": None}
    hold = asyncio.Event()
    names: dict[int, tuple[str, int]] = {signal.SIGINT: ("Ctrl-C", EXIT_SIGINT),
                                         signal.SIGTERM: ("SIGTERM", EXIT_SIGTERM)}

    def on_signal(signum: int) -> None:
        reason, code = names[signum]
        if state.get("holding") and not hold.is_set():
            hold.set()  # --keep: the signal ends the hold as asked; exit as signals exit
            state["code"] = code
            return
        if state["teardown"] is not None:
            state["teardown"].cancel()
        elif state["code"] is None:
            state["code"] = code
            echo(f"cancelled by {reason}; tearing down (again to stop the teardown)", err=True)
            session.cancel(reason)
        else:
            state["skip_teardown"] = True

    for signum in names:
        loop.add_signal_handler(signum, on_signal, signum)
    try:
        results: list[TaskResult] = []
        try:
            with reporting(progress_for_stdout()):
                results = await session.run_all(requests)
            echo()
            echo("Tasks:")
            for result in results:
                echo(task_line(result))
            if len(results) > 1 or any(r.outcome == scores.ERROR for r in results):
                echo(f"  {count_line(results)}")
            if eval_lines is not None:
                lines = eval_lines(results)
                if lines:
                    echo()
                    echo("Evals:")
                    for line in lines:
                        echo(line)
            up = session.teardown.still_up()
            if keep and up and state["code"] is None:
                count = sum(1 for item in up if item.kind == "sandbox") or len(up)
                noun = "sandbox" if any(i.kind == "sandbox" for i in up) else "thing"
                echo()
                them = "it" if count == 1 else "them"
                echo(f"Holding {plural(count, noun)} up; Ctrl-C tears {them} down.")
                for line in endpoint_lines(session.teardown.endpoints):
                    echo(line)
                state["holding"] = True
                await hold.wait()
        finally:  # whatever happened once runs began: teardown, always
            with contextlib.suppress(Exception):  # a closed stdout must not skip the teardown
                echo()
            teardown = asyncio.ensure_future(session.teardown.run())
            state["teardown"] = teardown
            stopped = False
            try:
                if state.get("skip_teardown"):
                    teardown.cancel()
                await teardown
            except asyncio.CancelledError:
                stopped = True
                await session.teardown.recheck()  # list only what is really still up
            teardown_summary(session.teardown, stopped)
    finally:
        for signum in names:
            loop.remove_signal_handler(signum)
    if state["code"] is not None:
        return results, state["code"]
    return results, EXIT_OK if all(is_success(r) for r in results) else EXIT_FAILED


# -- the command ----------------------------------------------------------------------------------


@click.command("run")
@click.argument("bundle", required=False)
@click.option("--task", "tasks", multiple=True, metavar="NAME",
              help="Run only this task (file name or stem); repeatable.")
@click.option("--eval", "eval_names", multiple=True, metavar="NAME",
              help="Run only this eval's tasks; repeatable.")
@click.option("--sandbox", metavar="A[,B...]",
              help="Sandbox providers to use for every sandbox (a fallback chain).")
@click.option("--model", metavar="NAME",
              help="The model every prompt_agent step asks for (replaces the steps' own).")
@click.option("--agent", "agent_id", type=ENTITY_ID, metavar="ID",
              help="The agent every deploy_agent step deploys (see agent-env a2a-agent list).")
@click.option("--keep", is_flag=True,
              help="Hold sandboxes up after the run until Ctrl-C; prints their URLs and tokens.")
@click.option("--dry-run", is_flag=True,
              help="Parse, plan, preflight and check what a real run needs (sandbox providers "
                   "usable, models answered); write and run nothing.")
@click.option("--json", "as_json", is_flag=True,
              help="Print the runs and their counts as JSON on stdout (progress goes to stderr).")
def run(bundle: str | None, tasks: tuple[str, ...], eval_names: tuple[str, ...],
        sandbox: str | None,
        model: str | None, agent_id: str | None, keep: bool, dry_run: bool,
        as_json: bool) -> int:
    """Run a bundle's evals (or all its tasks); with no BUNDLE, list the installed bundles."""
    if bundle is None:
        print_listing()
        return EXIT_OK
    if not as_json:
        return run_bundle(bundle, tasks=tasks, eval_names=eval_names, sandbox=sandbox, keep=keep,
                          dry_run=dry_run, model=model, agent_id=agent_id)
    import contextlib
    import json

    out = sys.stdout
    collected: list[TaskResult] = []
    with contextlib.redirect_stdout(sys.stderr):
        code = run_bundle(bundle, tasks=tasks, eval_names=eval_names, sandbox=sandbox, keep=keep,
                          dry_run=dry_run, model=model, agent_id=agent_id, collect=collected)
    out.write(json.dumps({"runs": [run_json(r) for r in collected],
                          "summary": summary_json(collected), "exit_code": code}, indent=2)
              + "\n")
    return code


def check_sandbox_chain(chain: Sequence[str]) -> None:
    """Before anything is written or run: the provider ``--sandbox`` picks must be configured.

    A missing API key or a bad setting is then one ``Error:`` line, not a failed deploy step.
    """
    from agent_env.tasks.sandboxes import choose_provider, open_provider

    open_provider(choose_provider(list(chain)))


def check_needs(tasks: Sequence[tuple[str, Sequence[Any]]], choices: RunChoices) -> None:
    """Before anything is written or run: what the tasks' steps need is there (a model someone
    answers, an agent someone ships: ``Step.needs``); one ``Error:`` line otherwise."""
    from agent_env.errors import UserError
    from agent_env.tasks.plan import run_needs

    problems = run_needs(tasks, choices)
    if problems:
        raise UserError(problems[0])


def sandbox_problems(plan: Any, chain: Sequence[str] | None) -> list[str]:
    """What a real run would find unusable: each distinct provider chain its steps ask for
    (``--sandbox``, a step's ``sandbox_type``, else the configured default), checked for a
    usable provider (Docker daemon reachable, API key set...)."""
    from agent_env.errors import UserError
    from agent_env.runtime import get_config

    chains: dict[tuple[str, ...], str] = {}
    if chain:
        chains[tuple(chain)] = "--sandbox"
    else:
        for task in plan.tasks:
            for step in task.steps:
                wanted = getattr(step, "sandbox_type", None)
                if isinstance(wanted, str) and wanted.strip():
                    key = tuple(split_chain(wanted))
                    chains.setdefault(key, f"{task.entry.label}: step '{step.id}'")
        chains.setdefault(tuple(get_config().sandbox_chain()), "[sandbox] default")
    problems = []
    for providers, where in chains.items():
        try:
            check_sandbox_chain(list(providers))
        except UserError as exc:
            why = "; ".join([str(exc), *getattr(exc, "notes", ())])
            problems.append(f"{where}: {' '.join(why.split())}")
    return problems


def run_bundle(
    text: str, *, tasks: Sequence[str] = (), eval_names: Sequence[str] = (),
    sandbox: str | None = None, keep: bool = False, dry_run: bool = False,
    model: str | None = None, agent_id: str | None = None,
    collect: list[TaskResult] | None = None,
) -> int:
    """Run the bundle; ``collect`` receives the results (``--json`` prints them)."""
    import attrs

    from agent_env.bundles.entities import StoredArtifacts, entity_exists
    from agent_env.bundles.find import locate
    from agent_env.bundles.ledger import Ledger
    from agent_env.bundles.parse import parse_bundle
    from agent_env.bundles.plan import plan_bundle
    from agent_env.runtime import object_store, versioned_store
    from agent_env.tasks.session import RunRequest
    from agent_env.tasks.steps import RunChoices

    chain = option_chain(sandbox)
    choices = RunChoices(model=model, agent=agent_id)
    location = locate(text)
    bundle, problems = parse_bundle(location.folder, location.id_root)
    versioned = versioned_store()
    plan = plan_bundle(bundle, parse_problems=problems, task_names=tasks,
                       eval_names=eval_names, sandbox_chain=chain,
                       stored=entity_exists(versioned))
    checked = [(t.entry.label, t.steps) for t in plan.tasks]
    if dry_run:  # what a real run would need, every problem at once
        from agent_env.tasks.plan import run_needs

        needs = run_needs(checked, choices) + sandbox_problems(plan, chain)
        if needs:
            from agent_env.errors import UserError

            for need in needs:
                echo(f"  {need}", err=True)
            raise UserError(f"dry run: a real run would fail: {plural(len(needs), 'problem')} "
                            "(listed above); nothing was written or run")
    else:
        if chain:
            check_sandbox_chain(chain)
        check_needs(checked, choices)
    objects = object_store()
    ledger = Ledger(versioned, objects, dry_run=dry_run).write_plan(plan)
    for line in ledger.lines:
        echo(str(line))
    if dry_run:
        for task in plan.tasks:
            ids = ", ".join(step.id for step in task.steps)
            echo(f"[{task.entry.label}] would run {len(task.steps)} steps: {ids}")
        echo("Dry run: nothing was written or run.")
        return EXIT_OK
    artifacts = StoredArtifacts(versioned, objects, ledger.versions.get("artifacts", {}))
    requests = [
        RunRequest(attrs.evolve(t.spec, version=ledger.version("tasks", t.entry.id)), artifacts,
                   choices=choices)
        for t in plan.tasks
    ]

    def eval_lines(results: list[TaskResult]) -> list[str]:
        from agent_env.tasks import scores

        by_name = {r.task.id: r for r in results}
        ids = {t.entry.name: t.entry.id for t in plan.tasks}
        lines = []
        for planned in plan.evals:
            ran = [by_name[ids[n]] for n in planned.task_names if ids.get(n) in by_name]
            passed = sum(1 for r in ran if r.outcome == scores.PASSED)
            version = ledger.version("evals", planned.entry.id)
            lines.append(f"  {planned.entry.label} v{version}: {passed} of {len(ran)} passed")
        return lines

    results, code = execute(requests, keep=keep, sandbox_chain=chain, eval_lines=eval_lines)
    if collect is not None:
        collect.extend(results)
    return code
