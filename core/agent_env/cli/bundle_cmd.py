"""``agent-env bundle init FOLDER --from-task ID | --from-eval ID``: stored entities as a bundle.

The bundle holds the task(s) as ``tasks/<name>.json``, every env and artifact they name as
``envs/<name>/`` (with an ``env.toml``) and ``artifacts/<name>/`` (with an ``artifact.toml``),
and for ``--from-eval`` an ``evals/<name>.toml``. Steps name those folders (a bundle's names),
and a pinned entity version is dropped, since the bundle's content is what gets versioned when
it runs. So ``agent-env run FOLDER`` runs it unchanged. The bundle is written to a scratch
folder beside FOLDER and renamed into place: a failure leaves nothing half-written.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from pathlib import Path
from typing import Any

import click

from agent_env.cli.console import echo
from agent_env.cli.params import ENTITY_ID, VERSION
from agent_env.errors import UserError
from agent_env.plural import plural

#: The entity kinds a bundle has folders for, and those folders.
FOLDERS = {"envs": "envs", "artifacts": "artifacts"}


@click.group("bundle")
def bundle() -> None:
    """Bundles from stored entities (init) and from other frameworks' tasks (import, export)."""


def _format(name: str) -> Any:
    """The bundle format plugin ``name`` (``harbor``); a one-line error naming the installed."""
    from agent_env.runtime import current

    return current().host.lookup("bundle_format", name)


def _fresh_output(output: Path, source: Path | None = None) -> None:
    from agent_env.bundles.parse import is_inside

    if output.exists() and (not output.is_dir() or any(output.iterdir())):
        raise UserError(f"{output} exists and is not empty: give a new folder")
    if source is not None and is_inside(output, source):
        raise UserError(f"--output {output} is inside {source}: a conversion would read "
                        "what it writes; give a folder outside it")


@bundle.command("import")
@click.argument("format_name", metavar="FORMAT")
@click.argument("source", type=click.Path(path_type=Path, exists=True, file_okay=False))
@click.option("--output", "-o", type=click.Path(path_type=Path, file_okay=False),
              required=True, help="The bundle folder to write (new or empty, or one an earlier "
                                  "import of the same SOURCE wrote: then only what changed is "
                                  "rewritten).")
@click.option("--layout", type=click.Choice(["dataset", "per-task"]), default="dataset",
              show_default=True,
              help="One bundle for all the tasks, or one bundle per task (OUTPUT/<task>/).")
@click.option("--image-map", "image_maps", multiple=True, metavar="FROM=TO",
              help="Rewrite base image FROM to TO in the tasks' Dockerfiles (a registry "
                   "mirror); repeatable.")
@click.option("--strict", is_flag=True,
              help="Exit 1 when any task is refused (the others are imported all the same).")
def import_bundle(format_name: str, source: Path, output: Path, layout: str,
                  image_maps: tuple[str, ...], strict: bool) -> int:
    """Convert FORMAT task folders (one, or a folder of them) into a bundle; run it with
    agent-env run OUTPUT. A task that cannot be converted is refused on a line of its own,
    and the others are imported."""
    import inspect

    from agent_env.contributions import ImportReport

    converter = _format(format_name)
    previous = _previous_import(output, format_name, source, layout)
    if previous is None:
        _fresh_output(output, source)
    parameters = inspect.signature(converter.import_tasks).parameters
    extra: dict[str, Any] = {}
    if "progress" in parameters:
        extra["progress"] = _progress_line()
    if layout != "dataset":
        if "layout" not in parameters:
            raise UserError(f"--layout {layout}: the {format_name} format writes one bundle")
        extra["layout"] = layout
    if image_maps:
        if "image_map" not in parameters:
            raise UserError(f"--image-map: the {format_name} format rewrites no images")
        pairs = [m.split("=", 1) for m in image_maps]
        bad = [m for m, pair in zip(image_maps, pairs, strict=True)
               if len(pair) != 2 or not all(part.strip() for part in pair)]
        if bad:
            raise UserError(f"--image-map {bad[0]}: give FROM=TO (two image names)")
        extra["image_map"] = {a.strip(): b.strip() for a, b in pairs}
    report: ImportReport | None = None

    def write(scratch: Path) -> list[str]:
        nonlocal report
        result = converter.import_tasks(source, scratch, **extra)
        if getattr(extra.get("progress"), "done", None):
            extra["progress"].done()
        lines = list(result.lines) if isinstance(result, ImportReport) else list(result)
        report = result if isinstance(result, ImportReport) else None
        (scratch / IMPORT_MARKER).write_text(json.dumps({
            "format": format_name, "source": str(source.resolve()), "layout": layout,
            "files": sorted(p.relative_to(scratch).as_posix()
                            for p in scratch.rglob("*") if p.is_file())}, indent=2) + "\n")
        return lines

    if previous is None:
        lines = _written(output, write)
    else:
        lines = _rewritten(output, previous, write)
    for line in lines:
        echo(line)
    if report is not None and report.refused:
        for refusal in report.refused:
            echo(f"refused {refusal}")
        echo(f"imported {report.imported}, refused {len(report.refused)}")
    echo(f"Run it with: agent-env run {output}" if layout == "dataset" else
         f"Run one with: agent-env run {output}/<task>")
    return 1 if strict and report is not None and report.refused else 0


#: What an import leaves in the bundle it wrote, so that a rerun rewrites only what changed.
IMPORT_MARKER = ".agentenv-import.json"


def _previous_import(output: Path, format_name: str, source: Path,
                     layout: str) -> dict[str, Any] | None:
    """The marker of an earlier import of the same source into ``output``, else None."""
    marker = output / IMPORT_MARKER
    if not marker.is_file():
        return None
    try:
        found = json.loads(marker.read_text(encoding="utf-8"))
    except ValueError:
        return None
    same = (found.get("format"), found.get("source"), found.get("layout")) == (
        format_name, str(source.resolve()), layout)
    return found if same and isinstance(found.get("files"), list) else None


def _rewritten(output: Path, previous: dict[str, Any], write: Any) -> list[str]:
    """Import again beside ``output``, then rewrite only the files that changed and remove
    those the earlier import wrote that this one did not; one line says how many."""
    import filecmp
    import shutil

    from agent_env.bundles.parse import is_inside
    from agent_env.scratch import owned_scratch

    with owned_scratch(".bundle-", output.parent) as scratch:
        lines = list(write(scratch))
        fresh = {p.relative_to(scratch).as_posix() for p in scratch.rglob("*") if p.is_file()}
        changed = 0
        for name in sorted(fresh):
            target = output / name
            if not is_inside(target.parent, output):
                raise UserError(f"{target.parent} leads out of {output} through a link: "
                                "remove the link, or import into a new folder")
            if target.is_symlink():
                target.unlink()  # the link goes, never what it points at
            elif target.is_file() and name != IMPORT_MARKER and filecmp.cmp(
                    scratch / name, target, shallow=False):
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(scratch / name, target)
            changed += name != IMPORT_MARKER
        # the marker is a file in the user's folder: only names inside the output are removed
        gone = [name for name in previous["files"] if isinstance(name, str)
                and name not in fresh and not name.startswith("/")
                and ".." not in name.split("/") and is_inside((output / name).parent, output)]
        for name in gone:
            (output / name).unlink(missing_ok=True)
        for folder in sorted({(output / n).parent for n in gone}, reverse=True):
            with contextlib.suppress(OSError):
                folder.rmdir()  # only when empty
    same = len(fresh) - 1 - changed
    lines.append(f"updated {output}: {plural(changed, 'file')} rewritten, {same} unchanged, "
                 f"{len(gone)} removed")
    return lines


def _progress_line() -> Any:
    """A line per task on stderr; on a terminal, one line rewritten in place (a bar)."""
    import sys

    tty = sys.stderr.isatty()

    def say(line: str) -> None:
        if tty:
            click.echo(f"\r\x1b[K{line}", nl=False, err=True)
        else:
            echo(line, err=True)

    def done() -> None:
        if tty:
            click.echo("", err=True)

    say.done = done  # type: ignore[attr-defined]
    return say


@bundle.command("export")
@click.argument("format_name", metavar="FORMAT")
@click.argument("source", metavar="BUNDLE",
                type=click.Path(path_type=Path, exists=True, file_okay=False))
@click.option("--output", "-o", type=click.Path(path_type=Path, file_okay=False),
              required=True, help="The folder to write the FORMAT task folders into.")
def export_bundle(format_name: str, source: Path, output: Path) -> None:
    """Convert a bundle's tasks that fit FORMAT into its task folders (others are named)."""
    converter = _format(format_name)
    _fresh_output(output, source)
    for line in _written(output, lambda scratch: converter.export_tasks(source, scratch)):
        echo(line)
    echo(f"Wrote {output}")


def _written(output: Path, write: Any) -> list[str]:
    """Run ``write(scratch)`` into a scratch folder beside ``output``, then rename it into
    place: a failure (or Ctrl-C) leaves nothing half-written, and after ``kill -9`` the folder
    is claimed in the state root, so ``agent-env gc`` finds it."""
    from agent_env.scratch import owned_scratch

    with contextlib.ExitStack() as stack:
        try:
            output.parent.mkdir(parents=True, exist_ok=True)
            scratch = stack.enter_context(owned_scratch(".bundle-", output.parent))
        except OSError as exc:
            raise UserError(f"cannot write {output} ({exc.strerror or exc}): give a folder you "
                            "can write") from None
        os.chmod(scratch, 0o755)
        lines = list(write(scratch))
        if output.exists():
            output.rmdir()  # empty, checked before
        os.replace(scratch, output)
    return lines


def _name(entity_id: str, taken: set[str]) -> str:
    base = re.sub(r"[^A-Za-z0-9_.-]+", "-", entity_id.rsplit("/", 1)[-1]).strip("-.") or "item"
    name, n = base, 2
    while name in taken:
        name, n = f"{base}-{n}", n + 1
    taken.add(name)
    return name


class _Writer:
    """Collects the entities the steps name, each once, under a bundle name."""

    def __init__(self, root: Path) -> None:
        from agent_env.bundles.plan import step_registry
        from agent_env.runtime import current

        self.root = root
        self.versioned = current().versioned_store
        self.objects = current().object_store
        self.registry = step_registry()
        self.names: dict[tuple[str, str], str] = {}
        self.taken: dict[str, set[str]] = {kind: set() for kind in FOLDERS}

    def step(self, raw: dict[str, Any]) -> dict[str, Any]:
        step_class = self.registry.get(str(raw.get("type")))
        if step_class is None:
            raise UserError(f"step '{raw.get('id')}' has type '{raw.get('type')}', which no "
                            "installed plugin provides")
        out = dict(raw)
        for field_name, kind in step_class.entity_fields.items():
            if kind not in FOLDERS or out.get(field_name) is None:
                continue
            value = out[field_name]
            pin = out.pop(f"{field_name.removesuffix('_id')}_version", None)
            if isinstance(value, str):
                out[field_name] = self.entity(kind, value, pin)
            elif isinstance(value, list):
                out[field_name] = [self.entity(kind, v, None) if isinstance(v, str) else v
                                   for v in value]
        return out

    def entity(self, kind: str, entity_id: str, version: int | None) -> str:
        from agent_env.tasks.artifacts import safe_targets

        if (kind, entity_id) in self.names:
            return self.names[(kind, entity_id)]
        record = self.versioned.get(kind, entity_id, version)
        if record is None:
            raise UserError(f"the task names {kind[:-1]} '{entity_id}', which is not stored")
        name = _name(entity_id, self.taken[kind])
        folder = self.root / FOLDERS[kind] / name
        folder.mkdir(parents=True)
        files = record.body.get("files", {})
        for path, target in safe_targets(folder, list(files)).items():
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(self.objects.get(files[path]["key"]))
            os.chmod(target, int(files[path].get("mode", 0o644)))
        import tomlkit

        if kind == "envs":
            settings = {k: record.body[k] for k in ("type", "environment_name", "image")
                        if record.body.get(k)}
            (folder / "env.toml").write_text(tomlkit.dumps(settings), encoding="utf-8")
        else:
            (folder / "artifact.toml").write_text(
                tomlkit.dumps({"type": record.body.get("type") or "file"}), encoding="utf-8")
        self.names[(kind, entity_id)] = name
        return name

    def task(self, task_id: str, version: int | None, taken: set[str]) -> str:
        record = self.versioned.get("tasks", task_id, version)
        if record is None:
            at = f" version {version}" if version else ""
            raise UserError(f"no task '{task_id}'{at} is stored (agent-env task create FILE "
                            f"--id {task_id} stores one)")
        steps = [self.step(raw) for raw in record.body["steps"]]
        name = _name(str(record.body.get("name") or task_id), taken)
        tasks = self.root / "tasks"
        tasks.mkdir(exist_ok=True)
        (tasks / f"{name}.json").write_text(json.dumps(steps, indent=2) + "\n",
                                            encoding="utf-8")
        return name


@bundle.command("init")
@click.argument("folder", type=click.Path(path_type=Path, file_okay=False))
@click.option("--from-task", "task_id", type=ENTITY_ID, help="A stored task's id.")
@click.option("--from-eval", "eval_id", type=ENTITY_ID,
              help="A stored eval's id (its tasks, at their versions).")
@click.option("--version", type=VERSION, help="The task's or eval's version (default: latest).")
def init(folder: Path, task_id: str | None, eval_id: str | None, version: int | None) -> None:
    """Write a bundle holding a stored task (or eval) and what it names; run it with
    agent-env run FOLDER."""
    if (task_id is None) == (eval_id is None):
        raise click.UsageError("give --from-task ID or --from-eval ID (one of them)")
    _fresh_output(folder)

    def write(scratch: Path) -> list[str]:
        writer = _Writer(scratch)
        taken: set[str] = set()
        if task_id is not None:
            writer.task(task_id, version, taken)
            return []
        record = writer.versioned.get("evals", eval_id or "", version)
        if record is None:
            raise UserError(f"no eval '{eval_id}' is stored (agent-env eval create FILE "
                            f"--id {eval_id} stores one)")
        written = [writer.task(t["task_id"], t.get("task_version"), taken)
                   for t in record.body.get("tasks", [])]
        import tomlkit

        evals = scratch / "evals"
        evals.mkdir()
        body: dict[str, Any] = {"tasks": written}
        if record.body.get("type"):
            body["type"] = record.body["type"]
        name = _name(str(record.body.get("name") or record.id), set())
        (evals / f"{name}.toml").write_text(tomlkit.dumps(body), encoding="utf-8")
        return []

    _written(folder, write)
    counts = {kind: len(list((folder / sub).iterdir())) if (folder / sub).is_dir() else 0
              for kind, sub in (("task", "tasks"), ("env", "envs"), ("artifact", "artifacts"))}
    echo(f"Wrote {folder}: " + ", ".join(plural(n, k) for k, n in counts.items()))
    echo(f"Run it with: agent-env run {folder}")


# -- validate: is every task solvable, and does doing nothing score 0? ----------------------------


@bundle.command("validate")
@click.argument("bundle_ref", metavar="BUNDLE")
@click.option("--task", "tasks", multiple=True, metavar="NAME",
              help="Validate only this task (file name or stem); repeatable.")
@click.option("--sandbox", metavar="A[,B...]", help="Sandbox providers (a fallback chain).")
@click.option("--oracle", "oracle", default="oracle", show_default=True, metavar="AGENT",
              help="The agent that must score 1 on every task (it runs each task's solution).")
@click.option("--nop", "nop", default="nop", show_default=True, metavar="AGENT",
              help="The agent that must score 0 on every task (it does nothing).")
def validate_bundle(bundle_ref: str, tasks: tuple[str, ...], sandbox: str | None, oracle: str,
                    nop: str) -> int:
    """Run every task twice, with an agent that runs its reference solution and one that
    does nothing: the first must pass and the second score 0. Lists each broken task with its
    verifier's own words; exit 1 when any is broken."""
    from agent_env.bundles.find import locate
    from agent_env.cli.run_cmd import run_bundle
    from agent_env.tasks.engine import TaskResult
    from agent_env.tasks.steps import RunChoices

    locate(bundle_ref)  # a bundle that is not there is one line, before any header
    runs: dict[str, list[TaskResult]] = {}
    for agent, must in ((oracle, "pass"), (nop, "score 0")):
        echo(f"== --agent {agent}: every task must {must}")
        runs[agent] = []
        run_bundle(bundle_ref, tasks=tasks, sandbox=sandbox, choices=RunChoices(agent=agent),
                   collect=runs[agent])
    broken = _broken(runs[oracle], runs[nop], oracle, nop)
    names = sorted({r.task.id for rs in runs.values() for r in rs})
    echo()
    echo(f"Validation: {len(names) - len(broken)} of {plural(len(names), 'task')} valid")
    for task_id, why in sorted(broken.items()):
        echo(f"  broken: {task_id.rsplit('/', 1)[-1]}: {'; '.join(why)}")
    return 1 if broken else 0


def _broken(solved: list[Any], idle: list[Any], oracle: str, nop: str) -> dict[str, list[str]]:
    """task id -> why it is broken: the solver did not pass, or doing nothing scored."""
    from agent_env.tasks import scores

    broken: dict[str, list[str]] = {}
    for result in solved:
        if result.outcome != scores.PASSED:
            broken.setdefault(result.task.id, []).append(
                f"{oracle} {result.describe()}{_words(result, failing=True)}")
    for result in idle:
        if result.outcome == scores.ERROR or any(v > 0 for v in result.scores.values()) \
                or result.outcome == scores.PASSED:
            broken.setdefault(result.task.id, []).append(
                f"{nop} {result.describe()}{_words(result, failing=False)}")
    return broken


def _words(result: Any, *, failing: bool) -> str:
    """What the task's verifiers said of the rows that make it broken (their own words)."""
    from agent_env.tasks.summary import verifier_said

    said = verifier_said(result, failing=failing)
    return f" ({' | '.join(said)})" if said else ""
