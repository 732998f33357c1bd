"""``agent-env run [BUNDLE]``: list installed bundles, or run a bundle's evals or tasks.

Output: one ledger line per entity, progress lines per step, a ``Tasks:``
(and ``Evals:``) summary, then what teardown did, last. Beyond the reference: with more than
one run, or any run that infrastructure failed, a count line keeps ``error`` (infrastructure,
not scored) apart from ``failed``; ``--json`` prints the runs and counts on stdout. Exit codes:
0 all passed (or unscored), 1 a run failed, scored below 1 or ended in error, 130 / 143 after
SIGINT / SIGTERM. The first signal cancels the runs and tears down; a second stops the
teardown and lists what is still up. The command parses its options, plans the bundle and
writes its ledger; running and reporting are :mod:`agent_env.runs`'.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import click

from agent_env.cli.console import echo
from agent_env.cli.params import run_choices
from agent_env.plural import plural
from agent_env.runs import EXIT_OK
from agent_env.sandbox.chain import option_chain

if TYPE_CHECKING:
    from agent_env.tasks.engine import TaskResult
    from agent_env.tasks.steps import RunChoices

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


# -- the command ----------------------------------------------------------------------------------


@click.command("run")
@click.argument("bundle", required=False)
@click.option("--task", "tasks", multiple=True, metavar="NAME",
              help="Run only this task (file name or stem); repeatable.")
@click.option("--eval", "eval_names", multiple=True, metavar="NAME",
              help="Run only this eval's tasks; repeatable.")
@click.option("--sandbox", metavar="A[,B...]",
              help="Sandbox providers to use for every sandbox (a fallback chain).")
@run_choices()
@click.option("--keep", is_flag=True,
              help="Hold sandboxes up after the run until Ctrl-C; prints their URLs and tokens.")
@click.option("--dry-run", is_flag=True,
              help="Parse, plan, preflight and check what a real run needs (sandbox providers "
                   "usable, models answered); write and run nothing.")
@click.option("--json", "as_json", is_flag=True,
              help="Print the runs and their counts as JSON on stdout (progress goes to stderr).")
def run(bundle: str | None, tasks: tuple[str, ...], eval_names: tuple[str, ...],
        sandbox: str | None, choices: RunChoices, keep: bool, dry_run: bool,
        as_json: bool) -> int:
    """Run a bundle's evals (or all its tasks); with no BUNDLE, list the installed bundles."""
    if bundle is None:
        print_listing()
        return EXIT_OK
    if not as_json:
        return run_bundle(bundle, tasks=tasks, eval_names=eval_names, sandbox=sandbox, keep=keep,
                          dry_run=dry_run, choices=choices)
    import json

    from agent_env.runs import json_on_stdout
    from agent_env.tasks.summary import run_json, summary_json

    collected: list[TaskResult] = []
    with json_on_stdout(True) as out:
        code = run_bundle(bundle, tasks=tasks, eval_names=eval_names, sandbox=sandbox, keep=keep,
                          dry_run=dry_run, choices=choices, collect=collected)
    out.write(json.dumps({"runs": [run_json(r) for r in collected],
                          "summary": summary_json(collected), "exit_code": code}, indent=2)
              + "\n")
    return code


def run_bundle(
    text: str, *, tasks: Sequence[str] = (), eval_names: Sequence[str] = (),
    sandbox: str | None = None, keep: bool = False, dry_run: bool = False,
    choices: RunChoices | None = None, collect: list[TaskResult] | None = None,
) -> int:
    """Run the bundle; ``collect`` receives the results (``--json`` prints them)."""
    import attrs

    from agent_env.bundles.entities import StoredArtifacts, entity_exists
    from agent_env.bundles.find import locate
    from agent_env.bundles.ledger import Ledger
    from agent_env.bundles.parse import parse_bundle
    from agent_env.bundles.plan import plan_bundle
    from agent_env.bundles.planned import planning
    from agent_env.runs import check_ready, run_problems, run_tasks
    from agent_env.runtime import current
    from agent_env.tasks.session import RunRequest
    from agent_env.tasks.steps import RunChoices

    chain = option_chain(sandbox)
    choices = choices or RunChoices()
    location = locate(text)
    bundle, problems = parse_bundle(location.folder, location.id_root)
    versioned = current().versioned_store
    plan = plan_bundle(bundle, parse_problems=problems, task_names=tasks,
                       eval_names=eval_names, sandbox_chain=chain,
                       stored=entity_exists(versioned))
    checked = [(t.entry.label, t.steps) for t in plan.tasks]
    with planning(bundle):  # its own agents are found in its folder, not yet in the store
        if dry_run:  # what a real run would need, every problem at once
            needs = run_problems(checked, choices, chain)
            if needs:
                from agent_env.errors import UserError

                for need in needs:
                    echo(f"  {need}", err=True)
                raise UserError(f"dry run: a real run would fail: "
                                f"{plural(len(needs), 'problem')} (listed above); nothing was "
                                "written or run")
        else:
            check_ready(checked, choices, chain)
    objects = current().object_store
    ledger = Ledger(versioned, objects, dry_run=dry_run).write_plan(plan)
    for line in ledger.lines:
        echo(str(line))
    if dry_run:
        for task in plan.tasks:
            ids = ", ".join(step.id for step in task.steps)
            echo(f"[{task.entry.label}] would run {len(task.steps)} steps: {ids}")
        echo("Dry run: nothing was written or run.")
        return EXIT_OK
    if not plan.tasks:  # a library bundle (see plan._select): written, nothing to run
        echo(f"{bundle.folder.name} has no tasks: it is written for other bundles to use "
             "(by id, or by the names its aliases.toml gives); nothing to run.")
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

    results, code = run_tasks(requests, keep=keep, sandbox_chain=chain, eval_lines=eval_lines)
    if collect is not None:
        collect.extend(results)
    return code
