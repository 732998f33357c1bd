"""``agent-env task``: stored, versioned tasks, run with the same engine as ``agent-env run``.

A stored task's steps name stored entities by id (``@local/~/b/greeting``); ``validate`` is the
preflight alone (for CI), with every problem listed and a non-zero exit when there is one.
``run --k N`` and ``run-batch --seeds`` run a task many times through the same machinery as
``agent-env eval run`` (pass@k table, infrastructure errors retried and counted apart).

A task file is a JSON array of steps, or an object with ``steps`` (what ``task get`` prints and
the reference exports), normalised: ``null`` fields are left out (unset) and ``depends_on``
entries written ``{"task_step_id": "a"}`` become ``"a"``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from agent_env.cli.console import echo
from agent_env.cli.params import ENTITY_ID, OUTPUT_DIR, VERSION, run_choices
from agent_env.errors import UserError
from agent_env.plural import plural
from agent_env.sandbox.chain import option_chain

if TYPE_CHECKING:
    from agent_env.tasks.steps import RunChoices


def _echo_json(value: Any) -> None:
    click.echo(json.dumps(value, indent=2, sort_keys=True, default=str))


def _read_task_file(path: Path) -> list[Any]:
    from agent_env.bundles.jsonfile import StrictJSONError, read_json_file

    try:
        data = read_json_file(path)
    except StrictJSONError as exc:
        raise UserError(f"{exc.where(str(path))}: {exc.message}") from None
    except OSError as exc:
        raise UserError(f"cannot read {path}: {exc.strerror}") from None
    if isinstance(data, dict) and "steps" in data:
        data = data["steps"]
    if not isinstance(data, list):
        raise UserError(f"{path}: a task file is a JSON array of step objects (or an object "
                        "with steps)")
    from agent_env.tasks.plan import normalise_step

    return [normalise_step(step) for step in data]


def _preflight(label: str, raw_steps: list[Any], sandbox: str | None = None) -> list[Any]:
    """The steps as preflight checked them (raw), or PreflightFailed."""
    return _checked(label, raw_steps, sandbox)[0]


def _checked(label: str, raw_steps: list[Any], sandbox: str | None = None) -> tuple[Any, Any]:
    from agent_env.bundles.plan import preflight_stored

    return preflight_stored(label, raw_steps, sandbox_chain=option_chain(sandbox))


def _stored_task(task_id: str, version: int | None) -> Any:
    from agent_env.bundles.entities import stored_task
    from agent_env.runtime import current

    return stored_task(current().versioned_store, task_id, version)


@click.group("task")
def task() -> None:
    """Stored, versioned tasks: create, get, validate, run, get-instance."""


@task.command("create")
@click.argument("file", type=click.Path(path_type=Path, dir_okay=False))
@click.option("--id", "task_id", type=ENTITY_ID, required=True,
              help="The task's id.")
def create(file: Path, task_id: str) -> None:
    """Store FILE (a JSON array of steps) as the next version of task ID."""
    from agent_env.bundles.ledger import steps_reason
    from agent_env.runtime import current

    steps = _preflight(str(file), _read_task_file(file))
    store = current().versioned_store
    latest = store.get("tasks", task_id)
    reason = steps_reason(latest.body.get("steps") if latest else None, steps)
    record, created = store.put_if_changed(
        "tasks", task_id, {"name": task_id, "label": task_id, "steps": steps}, reason=reason
    )
    if created:
        echo(f"task {task_id}: v{record.version} ({reason})")
    else:
        echo(f"task {task_id}: v{record.version}, unchanged")


@task.command("get")
@click.option("--id", "task_id", type=ENTITY_ID, required=True)
@click.option("--version", type=VERSION, help="A version (default: the latest).")
def get(task_id: str, version: int | None) -> None:
    """Print a stored task as JSON."""
    record = _stored_task(task_id, version)
    _echo_json({"id": record.id, "version": record.version, "steps": record.body["steps"],
                "created_at_utc": record.created_at_utc.isoformat(),
                "reason": record.reason})


@task.command("validate")
@click.argument("file", required=False, type=click.Path(path_type=Path, dir_okay=False))
@click.option("--id", "task_id", type=ENTITY_ID, help="Validate a stored task instead of a file.")
@click.option("--version", type=VERSION)
@click.option("--sandbox", metavar="A[,B...]", help="Check these sandbox providers instead.")
def validate(file: Path | None, task_id: str | None, version: int | None,
             sandbox: str | None) -> None:
    """Preflight a task file (or a stored task): every problem, non-zero exit if any."""
    if (file is None) == (task_id is None):
        raise click.UsageError("give a task FILE or --id (one of them)")
    if file is not None:
        label, steps = str(file), _read_task_file(file)
    else:
        record = _stored_task(task_id or "", version)
        label, steps = f"{record.id} v{record.version}", record.body["steps"]
    _preflight(label, steps, sandbox)
    echo(f"ok: {label}: {plural(len(steps), 'step')}, no problems")


@task.command("run")
@click.option("--id", "task_id", type=ENTITY_ID, required=True)
@click.option("--version", type=VERSION)
@click.option("--output-dir", type=OUTPUT_DIR,
              help="Write the instance record here as <instance>.json (with --k: runs.jsonl "
                   "and summary.json).")
@click.option("--sandbox", metavar="A[,B...]", help="Sandbox providers (a fallback chain).")
@click.option("--seed", "seeds", multiple=True, metavar="K=V",
              help="Replace <K> with V in every string of every step; repeatable.")
@click.option("--keep", is_flag=True, help="Hold sandboxes up after the run until Ctrl-C.")
@click.option("--k", type=int, default=1, show_default=True,
              help="Run it N times (4 at once) and report pass@k.")
@click.option("--start-step", type=click.IntRange(min=0), metavar="N",
              help="Continue a saved run at its step N (0-based): the steps before it are "
                   "taken as done, with the outputs --context-json recorded.")
@click.option("--context-json", type=click.Path(path_type=Path, dir_okay=False),
              metavar="FILE", help="The saved run --start-step continues: an instance "
                                   "record, as --output-dir writes it.")
@run_choices(per_role=True)
def run(task_id: str, version: int | None, output_dir: Path | None, sandbox: str | None,
        seeds: tuple[str, ...], keep: bool, k: int, start_step: int | None,
        context_json: Path | None, choices: RunChoices) -> int:
    """Run a stored task (--k N: N times, with a pass@k table; --start-step N with
    --context-json: continue a saved run from its step N)."""
    from agent_env.bundles.entities import stored_artifacts
    from agent_env.runs import check_ready, run_tasks
    from agent_env.runtime import current
    from agent_env.tasks.plan import TaskSpec
    from agent_env.tasks.records import StoredInstances
    from agent_env.tasks.session import RunRequest

    record = _stored_task(task_id, version)
    label = f"{record.id} v{record.version}"
    steps, checked = _checked(label, record.body["steps"], sandbox)
    chain = option_chain(sandbox)
    seed = {}
    for item in seeds:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"expected K=V, got {item!r}", param_hint="--seed")
        seed[key] = value
    resume = None
    if (start_step is None) != (context_json is None):
        raise click.UsageError("--start-step and --context-json go together: the step to "
                               "continue at, and the saved run it continues")
    if start_step is not None and context_json is not None:
        if k != 1:
            raise UserError("--start-step continues one run; use it without --k")
        from agent_env.tasks.resume import read_resume

        ids = [str(step.get("id")) for step in steps if isinstance(step, dict)]
        resume = read_resume(context_json, record.id, ids, start_step)
        echo(f"Loaded context from {context_json}")
    if k != 1:
        from agent_env.evals.groups import Group, Slot, new_group_id
        from agent_env.runs import check_counts

        check_counts(k=k)
        if keep:
            raise UserError("--keep holds one run's sandboxes up; use it without --k")
        slots = tuple(Slot(i, record.id, record.version, i + 1, seed or None) for i in range(k))
        group = Group(new_group_id(), "task", record.id, record.version, k, slots)
        return _run_group(group, output_dir=output_dir, choices=choices, chain=chain)
    check_ready([(label, checked)], choices, chain)
    spec = TaskSpec(record.id, record.id, tuple(steps), record.version)
    request = RunRequest(spec, stored_artifacts(), {}, choices, seed or None, resume)
    results, code = run_tasks([request], keep=keep, sandbox_chain=chain)
    if output_dir is not None:
        output_dir.mkdir(parents=True, exist_ok=True)
        stored = StoredInstances(current().document_store)
        for result in results:
            instance = stored.get(result.instance_id)
            if instance is not None:
                name = result.instance_id.rsplit("/", 1)[-1]
                path = output_dir / f"{name}.json"
                path.write_text(json.dumps(instance.to_json(), indent=2, default=str) + "\n")
                echo(f"Wrote {path}")
    return code


def _run_group(group: Any, *, output_dir: Path | None, choices: Any, chain: Any,
               concurrency: int | None = None, retries: int = 1, as_json: bool = False) -> int:
    """A stored task's runs as one group (``--k``, ``run-batch``): not resumable by id."""
    from agent_env.evals.groups import GroupStore
    from agent_env.runs import DEFAULT_CONCURRENCY, run_group
    from agent_env.runtime import current

    return run_group(group, GroupStore(current().document_store), resume=False,
                     max_concurrency=concurrency or DEFAULT_CONCURRENCY, retries=retries,
                     output_dir=output_dir, choices=choices, sandbox_chain=chain,
                     as_json=as_json, resume_hint=None)


@task.command("run-batch")
@click.option("--id", "task_id", type=ENTITY_ID, required=True)
@click.option("--version", type=VERSION)
@click.option("--seeds", required=True, metavar="CSV",
              help="Integer seeds, e.g. 1,2,3: one run each, <seed> replaced in the steps.")
@click.option("--concurrency", type=int, default=5, show_default=True,
              help="At most this many runs at once.")
@click.option("--retries", type=int, default=1, show_default=True,
              help="Runs again a run that ended in an infrastructure error, up to N times.")
@click.option("--output-dir", type=OUTPUT_DIR,
              help="Write runs.jsonl (a row per run) and summary.json here.")
@run_choices(agent=False, per_role=True)
@click.option("--sandbox", metavar="A[,B...]", help="Sandbox providers (a fallback chain).")
@click.option("--json", "as_json", is_flag=True,
              help="Print the summary and runs as JSON on stdout (progress goes to stderr).")
def run_batch(task_id: str, version: int | None, seeds: str, concurrency: int, retries: int,
              output_dir: Path | None, choices: RunChoices, sandbox: str | None,
              as_json: bool) -> int:
    """Run a stored task once per seed (metadata seed {"seed": N}, so <seed> in a step is N)."""
    from agent_env.evals.groups import Group, Slot, new_group_id
    from agent_env.runs import check_counts, parse_seeds

    check_counts(concurrency=concurrency, retries=retries, concurrency_option="--concurrency")
    numbers = parse_seeds(seeds)
    record = _stored_task(task_id, version)
    slots = tuple(Slot(i, record.id, record.version, i + 1, {"seed": str(n)})
                  for i, n in enumerate(numbers))
    group = Group(new_group_id(), "batch", record.id, record.version, 1, slots)
    return _run_group(group, output_dir=output_dir, choices=choices,
                      chain=option_chain(sandbox), concurrency=concurrency, retries=retries,
                      as_json=as_json)


@task.command("get-instance")
@click.argument("instance", required=False)
@click.option("--id", "instance_id", metavar="INSTANCE", help="The instance id (or give it "
              "as the argument).")
def get_instance(instance: str | None, instance_id: str | None) -> None:
    """Print an instance record (status, scores, completed steps, failures, context)."""
    if (instance is None) == (instance_id is None):
        raise click.UsageError("give the instance id, as the argument or with --id (once)")
    instance_id = str(instance or instance_id)
    from agent_env.runtime import current
    from agent_env.tasks.records import StoredInstances

    found = StoredInstances(current().document_store).get(instance_id)
    if found is None:
        raise UserError(f"no task instance '{instance_id}' (agent-env run prints instance ids)")
    _echo_json(found.to_json())


@task.command("review")
@click.option("--id", "instance_id", metavar="INSTANCE",
              help="The run whose review to decide (its instance id).")
@click.option("--step", "step_id", metavar="STEP",
              help="The review step (default: the run's only awaiting one).")
@click.option("--approve/--reject", "approve", default=None,
              help="Let the run go on, or stop it there.")
@click.option("--comment", help="Kept with the decision (a rejection's reason is shown).")
@click.option("--by", "decided_by", help="Who decides (default: $USER).")
@click.option("--list", "listing", is_flag=True, help="The reviews awaiting a decision.")
def review(instance_id: str | None, step_id: str | None, approve: bool | None,
           comment: str | None, decided_by: str | None, listing: bool) -> None:
    """Decide a run's review step (approve or reject), or list those awaiting one."""
    import getpass

    from agent_env.reviews import APPROVED, REJECTED, reviews

    store = reviews()
    if listing:
        waiting = store.awaiting()
        if not waiting:
            echo("No review awaits a decision.")
        for found in waiting:
            echo(f"{found.instance_id}  {found.step_id}  since {found.created_at}"
                 f"{'  ' + found.label if found.label else ''}")
        return
    if not instance_id or approve is None:
        raise UserError("give --id INSTANCE and --approve or --reject (--list shows the "
                        "reviews awaiting a decision)")
    if step_id is None:
        mine = [r for r in store.awaiting() if r.instance_id == instance_id]
        if len(mine) != 1:
            raise UserError(f"run {instance_id} has {len(mine)} reviews awaiting a decision; "
                            "name one with --step" if mine else
                            f"run {instance_id} has no review awaiting a decision")
        step_id = mine[0].step_id
    try:
        decided = store.decide(instance_id, step_id, APPROVED if approve else REJECTED,
                               decided_by or getpass.getuser(), comment)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    echo(f"Review {decided.step_id} of run {decided.instance_id}: {decided.state} by "
         f"{decided.decided_by}")


@task.command("answer")
@click.option("--ask", "ask_id", metavar="ASK", help="The ask to answer (default: the run's "
              "only awaiting one, with --id).")
@click.option("--id", "instance_id", metavar="INSTANCE", help="The run whose ask to answer.")
@click.option("--text", help="The answer: the human agent's reply to its prompt.")
@click.option("--call", "tool", metavar="TOOL", help="Call one of the ask's env tools first "
              "(the run makes the call) and print its result.")
@click.option("--args", "arguments", default="{}", metavar="JSON",
              help="The tool call's arguments, a JSON object.")
@click.option("--by", "answered_by", help="Who answers (default: $USER).")
@click.option("--list", "listing", is_flag=True, help="The asks awaiting an answer.")
def answer(ask_id: str | None, instance_id: str | None, text: str | None, tool: str | None,
           arguments: str, answered_by: str | None, listing: bool) -> None:
    """Play a human agent (deploy_human_agent): read its prompt, call its env's tools, answer.

    Without --text or --call, prints the ask: its prompt and the tools it offers."""
    import getpass
    import time

    from agent_env.asks import asks

    store = asks()
    if listing:
        waiting = store.awaiting()
        if not waiting:
            echo("No ask awaits an answer.")
        for waits in waiting:
            echo(f"{waits.ask_id}  {waits.agent_name}  since {waits.created_at}  "
                 f"{waits.prompt[:60]!r}")
        return
    if ask_id is None:
        mine = [a for a in store.awaiting() if instance_id in (None, a.instance_id)]
        if len(mine) != 1:
            raise UserError(f"{len(mine)} asks await an answer" + (
                f" in run {instance_id}" if instance_id else "") + "; name one with --ask "
                "(--list shows them)")
        ask_id = mine[0].ask_id
    found = store.get(ask_id)
    if found is None:
        raise UserError(f"no ask '{ask_id}' (--list shows the asks awaiting an answer)")
    by = answered_by or getpass.getuser()
    if tool is not None:
        try:
            args = json.loads(arguments)
        except ValueError as exc:
            raise UserError(f"--args is not JSON: {exc}") from None
        if not isinstance(args, dict):
            raise UserError("--args must be a JSON object")
        try:
            call = store.request_call(ask_id, tool, args, by)
        except ValueError as exc:
            raise UserError(str(exc)) from None
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            done = [c for c in store.calls(ask_id, "done") if c.call_id == call.call_id]
            if done:
                echo(("error: " if done[0].is_error else "") + str(done[0].result))
                break
            time.sleep(0.2)
        else:
            raise UserError(f"the run did not make the call to {tool} within 120s (is it "
                            "still running?)")
    if text is not None:
        try:
            ended = store.answer(ask_id, text, by)
        except ValueError as exc:
            raise UserError(str(exc)) from None
        echo(f"Answered ask {ended.ask_id} of run {ended.instance_id} as {ended.agent_name}")
    elif tool is None:
        echo(f"{found.ask_id} ({found.state}): {found.agent_name} is asked:\n{found.prompt}")
        for offered in found.tools:
            echo(f"  tool {offered['name']}: {offered.get('description') or ''}".rstrip())
