"""The one run path: what ``run``, ``task run``, ``task run-batch``, ``eval run``, ``env
mcp-server validate`` and ``a2a-agent validate`` call once their options are parsed.

Two shapes share everything here (the readiness checks, the signals, the report):

* :func:`run_tasks`: run requests side by side in one :class:`~agent_env.tasks.session.Session`
  that shares one teardown (so ``--keep`` can hold it up), printed by the terminal reporter,
  then a ``Tasks:`` summary and what teardown did, last;
* :func:`run_group`: a stored, resumable group of slots (an eval's ``k`` runs per task, a
  task's seeds), each run torn down as soon as it ends, infrastructure errors retried, a
  pass@k table.

Signals, both shapes: the first SIGINT/SIGTERM cancels the runs and tears down (exit 130 /
143); a second stops the teardown and says what may still be up.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent_env.cli.console import echo
from agent_env.errors import UserError
from agent_env.plural import plural
from agent_env.tasks.summary import count_line, is_success, task_line, why_lines

if TYPE_CHECKING:
    from agent_env.evals.groups import Group, GroupStore, Slot
    from agent_env.tasks.engine import TaskResult
    from agent_env.tasks.session import RunRequest
    from agent_env.tasks.steps import RunChoices, Step
    from agent_env.tasks.teardown import Teardown

EXIT_OK, EXIT_FAILED, EXIT_SIGINT, EXIT_SIGTERM = 0, 1, 130, 143
#: Runs of a group at once unless the command says otherwise.
DEFAULT_CONCURRENCY = 4
#: The most runs of one task a group holds (a group's slots are stored: a k of a billion
#: would fill memory and the document store before the first run started).
MAX_K = 10_000
#: The most runs one group holds, all tasks together.
MAX_RUNS = 100_000
MAX_RETRIES = 100

#: (label, its checked steps): what the readiness checks read of each task of a run.
CheckedTask = tuple[str, Sequence["Step"]]


# -- before anything is written or run ------------------------------------------------------------


def check_sandbox_chain(chain: Sequence[str]) -> None:
    """The provider chain ``--sandbox`` picks is configured and usable: a missing API key or a
    bad setting is one ``Error:`` line, not a failed deploy step."""
    from agent_env.tasks.sandboxes import choose_provider, open_provider

    open_provider(choose_provider(list(chain)))


def choice_chains(choices: RunChoices | None) -> list[tuple[list[str], str]]:
    """The provider chains the run's per-role choices name, each with its option."""
    from agent_env.sandbox.chain import split_chain

    given = ((choices.agent_sandbox, "--agent-sandbox"),
             (choices.env_sandbox, "--env-sandbox")) if choices else ()
    return [(split_chain(value), option) for value, option in given if value]


def sandbox_problems(tasks: Sequence[CheckedTask], chain: Sequence[str] | None,
                     choices: RunChoices | None = None) -> list[str]:
    """Each distinct provider chain the run would use (``--agent-sandbox``,
    ``--env-sandbox``, ``--sandbox``, a step's ``sandbox_type``, else the configured default),
    checked for a usable provider."""
    from agent_env.runtime import current
    from agent_env.sandbox.chain import split_chain

    chains: dict[tuple[str, ...], str] = {}
    for given, option in choice_chains(choices):
        chains.setdefault(tuple(given), option)
    if chain:
        chains[tuple(chain)] = "--sandbox"
    else:
        for label, steps in tasks:
            for step in steps:
                wanted = getattr(step, "sandbox_type", None)
                if isinstance(wanted, str) and wanted.strip():
                    chains.setdefault(tuple(split_chain(wanted)), f"{label}: step '{step.id}'")
        chains.setdefault(tuple(current().config.sandbox_chain()), "[sandbox] default")
    problems = []
    for providers, where in chains.items():
        try:
            check_sandbox_chain(list(providers))
        except UserError as exc:
            why = "; ".join([str(exc), *getattr(exc, "notes", ())])
            problems.append(f"{where}: {' '.join(why.split())}")
    return problems


def run_problems(tasks: Sequence[CheckedTask], choices: RunChoices,
                 chain: Sequence[str] | None) -> list[str]:
    """Everything a real run would find missing, at once (``--dry-run`` lists it): what each
    step says it needs (:meth:`~agent_env.tasks.steps.Step.needs`: a model someone answers, an
    agent someone ships) and the sandbox providers it would use."""
    from agent_env.tasks.plan import run_needs

    return run_needs(tasks, choices) + sandbox_problems(tasks, chain, choices)


def check_ready(tasks: Sequence[CheckedTask], choices: RunChoices,
                chain: Sequence[str] | None) -> None:
    """Before a real run writes anything: the ``--sandbox`` chain is usable and every step has
    what it needs; the first problem is the ``Error:`` line."""
    from agent_env.tasks.plan import run_needs

    if chain:
        check_sandbox_chain(chain)
    for given, option in choice_chains(choices):
        try:
            check_sandbox_chain(given)
        except UserError as exc:
            raise UserError(f"{option}: {exc}", notes=getattr(exc, "notes", None)) from None
    problems = run_needs(tasks, choices)
    if problems:
        raise UserError(problems[0])


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


# -- signals --------------------------------------------------------------------------------------


class Interrupts:
    """SIGINT and SIGTERM while runs are up: ``first(reason)`` on the first, ``again()`` on
    each later one; :attr:`code` is the exit code the first one asks for (130 / 143)."""

    NAMES = {"SIGINT": ("Ctrl-C", EXIT_SIGINT), "SIGTERM": ("SIGTERM", EXIT_SIGTERM)}

    def __init__(self, first: Callable[[str], None], again: Callable[[], None]) -> None:
        self.first, self.again = first, again
        self.code: int | None = None

    def _on(self, name: str) -> None:
        reason, code = self.NAMES[name]
        if self.code is None:
            self.code = code
            self.first(reason)
        else:
            self.again()

    @contextlib.contextmanager
    def installed(self) -> Iterator[Interrupts]:
        import asyncio
        import signal

        loop = asyncio.get_running_loop()
        signums = [getattr(signal, name) for name in self.NAMES]
        for signum in signums:
            loop.add_signal_handler(signum, self._on, signal.Signals(signum).name)
        try:
            yield self
        finally:
            for signum in signums:
                loop.remove_signal_handler(signum)


@contextlib.contextmanager
def json_on_stdout(as_json: bool) -> Iterator[Any]:
    """With ``--json``: everything printed inside goes to stderr; yields the real stdout, where
    the JSON goes."""
    from agent_env.plugins.discovery import unrouted_stdout

    out = unrouted_stdout()
    with contextlib.redirect_stdout(sys.stderr) if as_json else contextlib.nullcontext():
        yield out


# -- the report -----------------------------------------------------------------------------------


def endpoint_lines(endpoints: Sequence[Any]) -> list[str]:
    """What ``--keep`` holds up, to use while it waits: each URL with its bearer token."""
    return [f"  {e.label}: {e.url}" + (f"  (Authorization: Bearer {e.token})" if e.token else "")
            for e in endpoints]


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


# -- run requests side by side --------------------------------------------------------------------


def run_tasks(
    requests: Sequence[RunRequest],
    *,
    keep: bool = False,
    sandbox_chain: Sequence[str] | None = None,
    eval_lines: Callable[[list[TaskResult]], list[str]] | None = None,
) -> tuple[list[TaskResult], int]:
    """Run ``requests``, print progress and the summary, tear down; returns (results, exit
    code). Exit 0 when every run passed (or is unscored), 1 otherwise, 130/143 after a signal.
    """
    import asyncio

    return asyncio.run(_run_tasks(requests, keep, sandbox_chain, eval_lines))


async def _run_tasks(
    requests: Sequence[RunRequest], keep: bool, sandbox_chain: Sequence[str] | None,
    eval_lines: Callable[[list[TaskResult]], list[str]] | None,
) -> tuple[list[TaskResult], int]:
    import asyncio

    from agent_env.cli.progress import progress_for_stdout
    from agent_env.cli.reporter import reporting
    from agent_env.runtime import current
    from agent_env.tasks import scores
    from agent_env.tasks.records import StoredInstances
    from agent_env.tasks.session import Session

    session = Session(instances=StoredInstances(current().document_store),
                      sandbox_chain=sandbox_chain)
    hold = asyncio.Event()
    holding = False
    teardown: asyncio.Future[Any] | None = None
    skip_teardown = False

    def first(reason: str) -> None:
        if holding:
            hold.set()  # --keep: the signal ends the hold as asked; exit as signals exit
        elif teardown is not None:
            teardown.cancel()
        else:
            echo(f"cancelled by {reason}; tearing down (again to stop the teardown)", err=True)
            session.cancel(reason)

    def again() -> None:
        nonlocal skip_teardown
        if teardown is not None:
            teardown.cancel()
        else:
            skip_teardown = True

    interrupts = Interrupts(first, again)
    results: list[TaskResult] = []
    with interrupts.installed():
        try:
            with reporting(progress_for_stdout()):
                results = await session.run_all(requests)
            echo()
            echo("Tasks:")
            for result in results:
                echo(task_line(result))
                for line in why_lines(result):
                    echo(line)
            if len(results) > 1 or any(r.outcome == scores.ERROR for r in results):
                echo(f"  {count_line(results)}")
            lines = eval_lines(results) if eval_lines is not None else []
            if lines:
                echo()
                echo("Evals:")
                for line in lines:
                    echo(line)
            up = session.teardown.still_up()
            if keep and up and interrupts.code is None:
                count = sum(1 for item in up if item.kind == "sandbox") or len(up)
                noun = "sandbox" if any(i.kind == "sandbox" for i in up) else "thing"
                echo()
                them = "it" if count == 1 else "them"
                echo(f"Holding {plural(count, noun)} up; Ctrl-C tears {them} down.")
                for line in endpoint_lines(session.teardown.endpoints):
                    echo(line)
                holding = True
                await hold.wait()
        finally:  # whatever happened once runs began: teardown, always
            with contextlib.suppress(Exception):  # a closed stdout must not skip the teardown
                echo()
            teardown = asyncio.ensure_future(session.teardown.run())
            stopped = False
            try:
                if skip_teardown:
                    teardown.cancel()
                await teardown
            except asyncio.CancelledError:
                stopped = True
                await session.teardown.recheck()  # list only what is really still up
            teardown_summary(session.teardown, stopped)
    if interrupts.code is not None:
        return results, interrupts.code
    return results, EXIT_OK if all(is_success(r) for r in results) else EXIT_FAILED


# -- a stored group of runs -----------------------------------------------------------------------


def group_requests(group: Group, chain: Sequence[str] | None,
                   choices: RunChoices) -> Callable[[Slot], RunRequest]:
    """Preflight every task version the group runs (all problems in one error), check what
    they need, then a builder of each slot's request."""
    import attrs

    from agent_env.bundles.entities import stored_artifacts, stored_task
    from agent_env.bundles.plan import PreflightFailed, preflight_stored
    from agent_env.runtime import current
    from agent_env.tasks.plan import TaskSpec
    from agent_env.tasks.session import RunRequest

    versioned = current().versioned_store
    specs: dict[tuple[str, int], TaskSpec] = {}
    checked: list[CheckedTask] = []
    problems: list[str] = []
    for slot in group.slots:
        key = (slot.task_id, slot.task_version)
        if key in specs:
            continue
        record = stored_task(versioned, slot.task_id, slot.task_version)
        label = f"{record.id} v{record.version}"
        try:
            steps, built = preflight_stored(label, record.body["steps"], sandbox_chain=chain)
            checked.append((label, built))
        except PreflightFailed as exc:
            problems += exc.problems
            steps = []
        specs[key] = TaskSpec(record.id, record.id, tuple(steps), record.version)
    if problems:
        raise PreflightFailed(f"{group.kind} {group.subject_id}", problems)
    check_ready(checked, choices, chain)
    artifacts = stored_artifacts()

    def build(slot: Slot) -> RunRequest:
        spec = attrs.evolve(specs[(slot.task_id, slot.task_version)],
                            label=f"{slot.task_id} #{slot.sample}")
        metadata: dict[str, Any] = {}
        # which group (and eval) the run belongs to: its record says so, the explorer filters
        metadata["run_group_id"] = group.group_id
        if group.kind == "eval":
            metadata["eval_id"] = group.subject_id
        return RunRequest(spec, artifacts, metadata, choices,
                          dict(slot.seed) if slot.seed else None)

    return build


def run_group(group: Group, groups: GroupStore, *, resume: bool, max_concurrency: int,
              retries: int, output_dir: Path | None, choices: RunChoices,
              sandbox_chain: Sequence[str] | None, as_json: bool,
              resume_hint: str | None) -> int:
    """Preflight, record the group, run its slots, print the table; returns the exit code:
    0 every run completed (passed or not), 1 a run ended in an error or did not run, 130/143
    after a signal."""
    import json

    from agent_env.evals.execute import Executor
    from agent_env.runners import RunnerContext, open_runner
    from agent_env.runtime import current
    from agent_env.tasks.records import StoredInstances

    build = group_requests(group, sandbox_chain, choices)
    instances = StoredInstances(current().document_store)
    runner = open_runner(RunnerContext(instances, sandbox_chain=sandbox_chain))
    executor = Executor(group, groups, runner, build, instances,
                        max_concurrency=max_concurrency, retries=retries)
    if resume:
        executor.check_resume()
    else:
        groups.create(group)
    with json_on_stdout(as_json) as out:
        document, runs = _run_and_report(group, executor, output_dir, resume_hint)
    if as_json:
        from agent_env.evals.report import run_row

        out.write(json.dumps({**document, "runs": [run_row(r) for r in runs]}, indent=2,
                             default=str) + "\n")
    return int(document["exit_code"])


def _run_and_report(group: Group, executor: Any, output_dir: Path | None,
                    resume_hint: str | None) -> tuple[Any, Any]:
    import asyncio

    from agent_env.cli.progress import progress_for_stdout
    from agent_env.cli.reporter import reporting
    from agent_env.evals.report import summarise, summary_document, table_lines, write_output_dir
    from agent_env.tasks.scores import COMPLETED

    label = f"{group.kind} {group.subject_id}" + (
        f" v{group.subject_version}" if group.subject_version else "")
    echo(f"Run group {group.group_id}: {label}, {plural(len(group.slots), 'run')}"
         + (f" (resume: {resume_hint})" if resume_hint else ""))
    with reporting(progress_for_stdout(group_total=len(group.slots))):
        code = asyncio.run(_drive(executor))
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


async def _drive(executor: Any) -> int | None:
    """Run the executor with signals handled: the first stops the runs (they are cancelled,
    torn down and released for a resume), a second stops waiting for their teardown."""
    import asyncio

    main = asyncio.current_task()

    def first(reason: str) -> None:
        echo(f"cancelled by {reason}; stopping the runs and tearing down (again to stop "
             "the teardown)", err=True)
        executor.stop(reason)

    def again() -> None:
        if main is not None:
            main.cancel()

    interrupts = Interrupts(first, again)
    with interrupts.installed():
        try:
            await executor.run()
        except asyncio.CancelledError:
            echo("Teardown stopped; some sandboxes may still be up (agent-env gc removes "
                 "them)", err=True)
    return interrupts.code
