"""Harbor task folders to bundles and back (``agent-env bundle import/export harbor``).

A Harbor task is a folder: ``task.toml`` (settings; ``[agent]``/``[verifier]`` ``timeout_sec``),
``instruction.md`` (the prompt), ``environment/`` (a Dockerfile and its build context: the
container the agent works in), ``tests/test.sh`` (run in that container after the agent, writes
``/logs/verifier/reward.txt`` or ``reward.json``) and optionally ``solution/``.

Imported, task ``<name>`` becomes, in the bundle:

* ``envs/<name>/``: ``environment/`` with three lines added to its Dockerfile (after a marker
  line) that install our protocol package and start ``agentenv_harbor_shell.py`` (copied beside
  it): the container itself, served as an env whose tools are ``bash``, ``read_file`` and
  ``write_file`` (the image's working directory is theirs). ``env.toml`` names it ``harbor``;
* ``artifacts/<name>-harbor/``: ``tests/``, ``task.toml``, ``instruction.md`` and
  ``solution/`` as they were (what the agent must not see), and ``verify.py``, which sends
  ``tests/`` to the env after the agent is done and scores the rewards ``test.sh`` wrote;
* ``tasks/<name>.json``: ``deploy_env``, ``deploy_agent`` (the run's ``--agent`` or ``[agents]
  default`` plays it), ``prompt_agent`` with the instruction (``[agent] timeout_sec``) and
  ``env_outcome_verifier`` running ``verify.py``.

Export is the reverse for a bundle's tasks of that shape (the folders an import wrote, edited or
not); other tasks are named with the reason they do not fit. Import then export gives the
original files back.

A task whose ``environment/`` has a ``docker-compose.yaml`` becomes a ``multi`` env:
``envs/<name>/`` deploys ``main`` (``envs/<name>-main/``, the container as above) and each
other service (``envs/<name>-<service>/``, a ``service`` env) together; see
:mod:`agentenv_harbor.compose` for what maps and what is refused.

``[environment] allow_internet`` (true unless the task says false, as in Harbor; or
``network_mode = "no-network"``) is the env's ``network_policy``: ``open`` gives the task's
containers a route out, so ``test.sh`` can download what it needs; ``none`` gives them none.

What does not carry over, said in the import's lines: ``[environment]`` resources (kept in
``task.toml`` for export), an image without ``python3``, which cannot run
the shell server (the build fails naming the line), and a ``USER`` the Dockerfile sets: the
server, and so the agent's commands, run as root (as Harbor's verifier does), since the tests
write ``/tests`` and ``/logs/verifier``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs

from agent_env.api import FILE_DROPPED, MAX_TASK_FILE_BYTES, ImportReport, UserError, is_inside
from agentenv_harbor.compose import ComposePlan, compose_file
from agentenv_harbor.compose import plan as compose_plan

TEMPLATES = Path(__file__).parent / "templates"
SHELL_FILE = "agentenv_harbor_shell.py"
#: The line before what the import adds to a Dockerfile; export cuts from it.
MARKER = "# --- added by agent-env bundle import harbor: the container as an AgentEnv env ---"
ADDED_LINES = f"""{MARKER}
USER root
COPY {SHELL_FILE} /opt/agentenv-harbor/{SHELL_FILE}
RUN PIP_BREAK_SYSTEM_PACKAGES=1 python3 -m pip install --no-cache-dir \\
    --disable-pip-version-check agentenv-framework-protocol
CMD ["python3", "/opt/agentenv-harbor/{SHELL_FILE}"]
"""
ENV_TOML = 'environment_name = "harbor"\nnetwork_policy = "{policy}"\n'
ARTIFACT_SUFFIX = "-harbor"
#: A compose task's main container, beside the multi env named for the task.
MAIN_SUFFIX = "-main"
#: A separate verifier's env, and the artifact's file telling verify.py about it.
VERIFIER_SUFFIX = "-verifier"
VERIFIER_FILE = "harbor-verifier.json"
#: What the import copies into the artifact as it was (export writes them back).
KEPT = ("task.toml", "instruction.md", "tests", "solution")
DEFAULT_AGENT_TIMEOUT = 600.0
DOWNLOADS = re.compile(r"\b(pip3? install|uvx?\b|curl|wget|apt(-get)? install|npm install)")


# -- copying: only regular files and folders inside their source, within a budget --------------

#: The most one import or export copies, all files together; more is refused, not truncated.
MAX_TOTAL_BYTES = 2 * 1024**3
#: The most a text file the conversion reads (task.toml, instruction.md, test.sh) may hold.
MAX_TEXT_BYTES = 4 * 1024 * 1024
_CHUNK = 1024 * 1024
#: names a copy never carries: what a bundle never keeps (version control, bytecode caches,
#: folder litter), said in the import's lines
_SKIPPED = FILE_DROPPED


@attrs.define
class Budget:
    """Bytes a conversion may still copy; charged chunk by chunk, so a huge file stops it
    early and Ctrl-C or SIGTERM (raised between chunks) ends it at once."""

    left: int = attrs.field(factory=lambda: MAX_TOTAL_BYTES)
    #: what the copies left out (:data:`_SKIPPED`), for the import's lines
    skipped: list[Path] = attrs.field(factory=list)
    #: base images to rewrite (``--image-map``), and the rewrites made, for the lines
    images: dict[str, str] = attrs.field(factory=dict)
    mapped: list[tuple[str, str, str]] = attrs.field(factory=list)

    def charge(self, size: int, path: Path) -> None:
        self.left -= size
        if self.left < 0:
            raise UserError(f"{path}: the conversion would copy more than "
                            f"{MAX_TOTAL_BYTES // 1024**3} GiB; keep large data out of task "
                            "folders (download or build it in the Dockerfile)")


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "a symlink"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device node"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _refuse(path: Path, mode: int) -> UserError:
    return UserError(f"{path} is {_kind(mode)}: only regular files and folders are copied "
                     "(copy the file itself in)")


def copy_file(source: Path, target: Path, budget: Budget) -> None:
    """Copy one regular file (never through a link, never a FIFO or device) in chunks."""
    info = os.lstat(source)
    if not stat.S_ISREG(info.st_mode):
        raise _refuse(source, info.st_mode)
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    handle = os.open(source, flags)
    try:
        if not stat.S_ISREG(os.fstat(handle).st_mode):  # swapped since the lstat
            raise _refuse(source, os.fstat(handle).st_mode)
        with open(handle, "rb", closefd=False) as reader, open(target, "xb") as writer:
            while chunk := reader.read(_CHUNK):
                budget.charge(len(chunk), source)
                writer.write(chunk)
    finally:
        os.close(handle)
    os.chmod(target, 0o755 if info.st_mode & 0o111 else 0o644)


def copy_tree(source: Path, target: Path, budget: Budget,
              skip: frozenset[str] = frozenset()) -> None:
    """Copy the folder ``source`` to the new folder ``target``: regular files and folders
    only (a link, FIFO, socket or device anywhere is refused naming it), ``skip`` and
    bytecode caches left out, every byte charged to ``budget``."""
    info = os.lstat(source)
    if not stat.S_ISDIR(info.st_mode):
        raise _refuse(source, info.st_mode) if not stat.S_ISREG(info.st_mode) else UserError(
            f"{source} is a file where a folder was expected")
    target.mkdir(parents=True)
    with os.scandir(source) as items:
        entries = sorted(items, key=lambda e: e.name)
    for entry in entries:
        if entry.name in skip:
            continue
        if entry.name in _SKIPPED:
            budget.skipped.append(Path(entry.path))
            continue
        path = Path(entry.path)
        if entry.is_dir(follow_symlinks=False):
            copy_tree(path, target / entry.name, budget)
        else:
            copy_file(path, target / entry.name, budget)


def read_text(path: Path) -> str:
    """A small UTF-8 text file the conversion reads; a link, FIFO or device is refused before
    it is opened (a FIFO would block, ``/dev/zero`` would never end)."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        raise UserError(f"{path}: no such file") from None
    if not stat.S_ISREG(info.st_mode):
        raise _refuse(path, info.st_mode)
    if info.st_size > MAX_TEXT_BYTES:
        raise UserError(f"{path} is larger than {MAX_TEXT_BYTES // 1024**2} MiB")
    try:
        with open(path, "rb") as handle:
            return handle.read(MAX_TEXT_BYTES + 1).decode("utf-8")
    except UnicodeDecodeError:
        raise UserError(f"{path}: not UTF-8 text (save it as UTF-8)") from None


#: a step field naming a folder of the bundle: one plain name, never a path
_FOLDER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")


def _bundle_folder(bundle: Path, kind: str, name: object) -> Path | None:
    """``bundle/kind/name`` when ``name`` is one plain name of a real folder inside the
    bundle (no ``..``, no ``/``, no link out); else None."""
    if not isinstance(name, str) or not _FOLDER_NAME.fullmatch(name) or ".." in name:
        return None
    folder = bundle / kind / name
    if folder.is_symlink() or not is_inside(folder, bundle / kind):
        return None
    return folder


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "task"


def task_folders(source: Path) -> list[Path]:
    """``source`` itself when it is a task folder, else its task subfolders (sorted)."""
    if (source / "task.toml").is_file():
        return [source]
    found = sorted(p for p in source.iterdir() if (p / "task.toml").is_file())
    if not found:
        raise UserError(f"{source}: no Harbor task here (a task folder holds task.toml, "
                        "instruction.md, environment/ and tests/test.sh)")
    return found


#: The tables of task.toml the import reads; each must be a table when present.
TABLES = ("task", "agent", "verifier", "environment")
#: The longest timeout an import writes into a task (a day): longer is a typo, not a plan.
MAX_TIMEOUT_SEC = 24 * 3600.0


def _read_settings(folder: Path) -> dict[str, Any]:
    where = folder / "task.toml"
    try:
        settings = tomllib.loads(read_text(where).removeprefix("\ufeff"))
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"{where}: not valid TOML ({exc})") from None
    except RecursionError:  # arrays nested past the parser's depth
        raise UserError(f"{where}: not valid TOML (nested too deep)") from None
    for table in TABLES:
        if table in settings and not isinstance(settings[table], dict):
            raise UserError(f"{where}: {table} must be a table ([{table}]), not "
                            f"{settings[table]!r}"[:300])
    return settings


def _seconds(settings: dict[str, Any], table: str, folder: Path) -> float | None:
    value = (settings.get(table) or {}).get("timeout_sec")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not 0 < value <= MAX_TIMEOUT_SEC:  # also refuses inf and nan (TOML has both)
        raise UserError(f"{folder / 'task.toml'}: [{table}] timeout_sec must be a number of "
                        f"seconds from 0 to {MAX_TIMEOUT_SEC:.0f}, not {value!r}")
    return float(value)


def _name(settings: dict[str, Any], folder: Path) -> str:
    declared = (settings.get("task") or {}).get("name")
    if declared is not None and not isinstance(declared, str):
        raise UserError(f"{folder / 'task.toml'}: [task] name must be a string, not "
                        f"{declared!r}"[:300])
    return _slug(declared.rsplit("/", 1)[-1]) if declared else _slug(folder.name)


def _compose(folder: Path) -> ComposePlan | None:
    """The task's compose plan, or None for a one-container task; UserError when it cannot
    be honoured."""
    path = compose_file(folder / "environment")
    return None if path is None else compose_plan(path, read_text(path))


@attrs.frozen
class TaskPlan:
    """What the import writes for one task folder."""

    name: str
    settings: dict[str, Any]
    compose: ComposePlan | None = None
    #: A separate verifier (``[verifier] environment_mode = "separate"``): the artifact paths
    #: it gets from the agent's container; None: the tests run in the agent's container.
    verifier_artifacts: tuple[str, ...] | None = None
    notes: tuple[str, ...] = ()
    #: ``solution/solve.sh`` is there: ``--agent oracle`` can run it
    has_solution: bool = False

    @property
    def separate(self) -> bool:
        return self.verifier_artifacts is not None

    @property
    def main_env(self) -> str:
        """The env the agent works in (a compose task's ``main``)."""
        return f"{self.name}{MAIN_SUFFIX}" if self.compose else self.name

    def env_names(self) -> list[str]:
        """The env folders the import writes."""
        names = [self.name]
        if self.compose is not None:
            names += [self.main_env, *(f"{self.name}-{s.name}" for s in self.compose.sidecars)]
        if self.separate:
            names.append(self.name + VERIFIER_SUFFIX)
        return names


def _plan(folder: Path) -> TaskPlan:
    """A task folder's plan; UserError naming every problem."""
    problems = _check(folder)
    if problems:
        raise UserError("; ".join(problems))
    settings = _read_settings(folder)
    _seconds(settings, "agent", folder)
    _seconds(settings, "verifier", folder)
    artifacts, notes = _verifier(settings, folder)
    return TaskPlan(_name(settings, folder), settings, _compose(folder), artifacts, notes,
                    (folder / "solution" / "solve.sh").is_file())


def _verifier(settings: dict[str, Any], folder: Path) -> tuple[tuple[str, ...] | None,
                                                                 tuple[str, ...]]:
    """Schema 1.3's verifier keys: the artifact paths a separate verifier gets (None: shared
    mode) and note lines; UserError for what cannot be honoured."""
    where = folder / "task.toml"
    verifier = settings.get("verifier") or {}
    mode = verifier.get("environment_mode")
    table = verifier.get("environment")
    problems, notes = [], []
    if mode not in (None, "shared", "separate"):
        problems.append(f"{where}: [verifier] environment_mode must be \"shared\" or "
                        f"\"separate\", not {mode!r}")
    if mode == "shared" and table is not None:
        problems.append(f"{where}: [verifier.environment] needs environment_mode "
                        "\"separate\" (Harbor refuses it with \"shared\")")
    separate = mode == "separate" or (mode is None and table is not None)
    if table is not None and not isinstance(table, dict):
        problems.append(f"{where}: [verifier] environment must be a table")
    elif isinstance(table, dict):
        if table.get("docker_image"):
            problems.append(f"{where}: [verifier.environment] docker_image: a prebuilt "
                            "verifier image is not supported (give tests/Dockerfile)")
        unused = sorted(k for k in table if k not in ("docker_image", "build_timeout_sec"))
        if unused:
            notes.append(f"[verifier.environment] {', '.join(unused)} kept in task.toml, not "
                         "applied")
    if separate and not (folder / "tests" / "Dockerfile").is_file():
        problems.append(f"{folder}: a separate verifier is built from tests/Dockerfile, and "
                        "this task has none")
    if "steps" in settings:
        problems.append(f"{where}: [[steps]]: multi-step tasks are not supported")
    paths = []
    for entry in settings.get("artifacts") or []:
        source = entry.get("source") if isinstance(entry, dict) else entry
        if not isinstance(source, str) or not source.startswith("/"):
            problems.append(f"{where}: artifacts entry {entry!r} names no absolute path"[:300])
        elif isinstance(entry, dict) and entry.get("service") not in (None, "main"):
            problems.append(f"{where}: artifacts entry {source}: collecting from service "
                            f"{entry['service']!r} is not supported (only main's files)")
        else:
            paths.append(source)
    if settings.get("artifacts") is not None and not separate:
        notes.append("artifacts kept in task.toml: Harbor copies them to its trial folder; "
                     "here a shared verifier reads them in the container itself")
    if (settings.get("solution") or {}).get("env"):
        notes.append("[solution] env kept in task.toml (for an oracle agent, which this "
                     "installation does not have)")
    if problems:
        raise UserError("; ".join(problems))
    return (tuple(paths) if separate else None), tuple(notes)


def _remove_task(output: Path, plan: TaskPlan) -> None:
    """What an import that failed half-way wrote for one task."""
    for env in plan.env_names():
        shutil.rmtree(output / "envs" / env, ignore_errors=True)
    shutil.rmtree(output / "artifacts" / (plan.name + ARTIFACT_SUFFIX), ignore_errors=True)
    (output / "tasks" / f"{plan.name}.json").unlink(missing_ok=True)


def _check(folder: Path) -> list[str]:
    problems = []
    environment = folder / "environment"
    if not (environment / "Dockerfile").is_file():
        problems.append(f"{folder}: has no environment/Dockerfile")
    try:
        _compose(folder)
    except UserError as exc:
        problems.append(str(exc))
    if not os.path.lexists(folder / "instruction.md"):
        problems.append(f"{folder}: has no instruction.md")
    else:
        try:
            read_text(folder / "instruction.md")
        except UserError as exc:
            problems.append(str(exc))
    if not (folder / "tests" / "test.sh").is_file():
        problems.append(f"{folder}: has no tests/test.sh")
    for current, dirs, files in os.walk(folder, followlinks=False):
        for name in sorted([*dirs, *files]):
            mode = os.lstat(os.path.join(current, name)).st_mode
            if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
                problems.append(str(_refuse(Path(current, name), mode)))
    return problems


def _task_steps(plan: TaskPlan, instruction: str,
                agent_timeout: float | None) -> list[dict[str, Any]]:
    name = plan.name
    steps: list[dict[str, Any]] = [
        {"id": "deploy", "type": "deploy_env", "env_id": name},
        {"id": "agent", "type": "deploy_agent", "depends_on": ["deploy"], "env_ids": [name]},
        {"id": "solve", "type": "prompt_agent", "depends_on": ["agent"], "prompt": instruction,
         "timeout_seconds": agent_timeout or DEFAULT_AGENT_TIMEOUT},
        {"id": "tests", "type": "env_outcome_verifier", "depends_on": ["solve"], "env_id": name,
         "file_artifact_id": name + ARTIFACT_SUFFIX, "verifier_id": "reward",
         "score_aggregator": "weighted_average"},
    ]
    if plan.has_solution:  # what --agent oracle runs in place of an agent
        steps[1]["solution_artifact_id"] = name + ARTIFACT_SUFFIX
    if plan.separate:  # its own container, deployed once the agent is done
        steps.insert(3, {"id": "verifier", "type": "deploy_env", "depends_on": ["solve"],
                         "env_id": name + VERIFIER_SUFFIX})
        steps[-1]["depends_on"] = ["verifier"]
    return steps


class HarborFormat:
    """The ``harbor`` bundle format (see the module docstring)."""

    name = "harbor"
    description = "Harbor task folders (task.toml, instruction.md, environment/, tests/test.sh)"

    @classmethod
    def import_tasks(cls, source: Path, output: Path,
                     progress: Callable[[str], None] | None = None,
                     layout: str = "dataset",
                     image_map: dict[str, str] | None = None) -> ImportReport:
        """Every task folder of ``source`` that can be imported, each on its own: a task that
        cannot is refused with why (its partly written files removed), and the others are
        imported all the same; nothing imported at all is a UserError. ``layout``
        ``per-task`` writes each task as a bundle of its own, ``output/<task>/``."""
        folders = task_folders(source)
        say = progress or (lambda line: None)
        lines: list[str] = []
        refused: list[str] = []
        names: dict[str, Path] = {}
        envs: dict[str, Path] = {}
        from agentenv_harbor.settings import harbor_settings

        budget = Budget(images={**harbor_settings().image_map, **(image_map or {})})
        for index, folder in enumerate(folders, 1):
            if len(folders) > 1:  # a dataset: a line per task as it goes
                say(f"[{index}/{len(folders)}] {folder}")
            try:
                plan = _plan(folder)
                taken = [f"task '{plan.name}' (as {names[plan.name]})"] \
                    if plan.name in names else []
                taken += [f"envs/{env}/ (written for {envs[env]})"
                          for env in plan.env_names() if env in envs]
                if taken:
                    raise UserError(f"{folder}: would write {', '.join(taken)} again (rename "
                                    "the task)")
            except UserError as exc:
                refused.append(str(exc))
                continue
            root = output if layout == "dataset" else output / plan.name
            try:
                written = _import_one(plan, folder, root, budget)
                if root != output:  # its own bundle: the line names its folder
                    written[0] = written[0].replace(" -> ", f" -> {plan.name}/: ", 1)
                lines += written
            except UserError as exc:
                if root == output:
                    _remove_task(output, plan)
                else:
                    shutil.rmtree(root, ignore_errors=True)
                refused.append(str(exc))
                continue
            names[plan.name] = folder
            envs.update(dict.fromkeys(plan.env_names(), folder))
        if not names:
            raise UserError("; ".join(refused))
        lines.append("Its tasks leave the agent to the run: give --agent ID (agent-env a2a-agent "
                     "list) or set [agents] default")
        return ImportReport(lines, len(names), refused)

    @classmethod
    def export_tasks(cls, bundle: Path, output: Path) -> list[str]:
        tasks = sorted((bundle / "tasks").glob("*.json")) if (bundle / "tasks").is_dir() else []
        if not tasks:
            raise UserError(f"{bundle}: no tasks/*.json (is it a bundle folder?)")
        lines, exported, budget = [], 0, Budget()
        for task in tasks:
            why = _export_one(bundle, task, output, budget)
            if why:
                lines.append(f"skipped tasks/{task.name}: {why}")
            else:
                exported += 1
                lines.append(f"exported tasks/{task.name} -> {task.stem}/")
        if not exported:
            raise UserError(f"{bundle}: no task fits the Harbor format ("
                            + "; ".join(lines) + ")")
        return lines


#: In the added block of a Dockerfile whose base image the import rewrote: export puts the
#: original back.
IMAGE_MAP_LINE = "# agent-env image map: "
_FROM = re.compile(r"^(\s*FROM\s+(?:--\S+\s+)*)(\S+)", re.IGNORECASE | re.MULTILINE)


def map_images(dockerfile: str, images: dict[str, str]) -> tuple[str, list[tuple[str, str]]]:
    """``dockerfile`` with each ``FROM`` image ``images`` maps rewritten, and the rewrites."""
    mapped: list[tuple[str, str]] = []

    def swap(match: re.Match[str]) -> str:
        image = match.group(2)
        if image not in images:
            return match.group(0)
        mapped.append((image, images[image]))
        return match.group(1) + images[image]

    return _FROM.sub(swap, dockerfile), list(dict.fromkeys(mapped))


def unmap_images(dockerfile: str, added: str) -> str:
    """``dockerfile`` with the rewrites ``added`` records undone (for export)."""
    for line in added.splitlines():
        if line.startswith(IMAGE_MAP_LINE):
            original, _, mapped = line[len(IMAGE_MAP_LINE):].partition(" -> ")
            dockerfile = _FROM.sub(lambda m, a=original, b=mapped: m.group(1) + a
                                   if m.group(2) == b else m.group(0), dockerfile)
    return dockerfile


def network_policy(table: object) -> str:
    """An ``[environment]`` table's egress as an env network policy: ``open`` unless it says
    ``allow_internet = false`` or ``network_mode = "no-network"``."""
    table = table if isinstance(table, dict) else {}
    closed = table.get("allow_internet") is False or table.get("network_mode") == "no-network"
    return "none" if closed else "open"


def _shell_env(source: Path, env: Path, budget: Budget,
               environment: dict[str, str] | None = None, policy: str = "open") -> None:
    """``source`` (a build context) as an env served by the shell server."""
    copy_tree(source, env, budget)
    dockerfile = read_text(env / "Dockerfile")
    if not dockerfile.endswith("\n"):
        dockerfile += "\n"
    dockerfile, mapped = map_images(dockerfile, budget.images)
    budget.mapped += [(a, b, f"{source.name}/Dockerfile") for a, b in mapped]
    added = ADDED_LINES + "".join(f"{IMAGE_MAP_LINE}{a} -> {b}\n" for a, b in mapped) + "".join(
        f"ENV {key}={_env_value(value)}\n" for key, value in (environment or {}).items())
    (env / "Dockerfile").write_text(dockerfile + added, encoding="utf-8")
    shutil.copyfile(TEMPLATES / SHELL_FILE, env / SHELL_FILE)
    (env / "env.toml").write_text(ENV_TOML.format(policy=policy), encoding="utf-8")


def _import_one(plan: TaskPlan, folder: Path, output: Path, budget: Budget) -> list[str]:
    name, settings, compose = plan.name, plan.settings, plan.compose
    policy = network_policy(settings.get("environment"))
    _shell_env(folder / "environment", output / "envs" / plan.main_env, budget,
               compose.main_environment if compose else None, policy)
    if compose is not None:
        _write_compose_envs(name, compose, output, budget, policy)
    if plan.separate:
        verifier = (settings.get("verifier") or {}).get("environment")
        _shell_env(folder / "tests", output / "envs" / (name + VERIFIER_SUFFIX), budget,
                   policy=network_policy(verifier) if isinstance(verifier, dict) else policy)

    artifact = output / "artifacts" / (name + ARTIFACT_SUFFIX)
    artifact.mkdir(parents=True)
    for kept in KEPT:
        source = folder / kept
        if source.is_dir() and not source.is_symlink():
            copy_tree(source, artifact / kept, budget)
        elif os.path.lexists(source):
            copy_file(source, artifact / kept, budget)
    shutil.copyfile(TEMPLATES / "verify.py", artifact / "verify.py")
    if plan.separate:
        (artifact / VERIFIER_FILE).write_text(json.dumps({
            "env": name + VERIFIER_SUFFIX, "artifacts": list(plan.verifier_artifacts or ())},
            indent=2) + "\n", encoding="utf-8")

    instruction = read_text(folder / "instruction.md")
    tasks = output / "tasks"
    tasks.mkdir(exist_ok=True)
    steps = _task_steps(plan, instruction, _seconds(settings, "agent", folder))
    text = json.dumps(steps, indent=2) + "\n"
    if len(text.encode("utf-8")) > MAX_TASK_FILE_BYTES:  # a bundle we could not run
        raise UserError(f"{folder / 'instruction.md'}: too long for a task file (at most "
                        f"{MAX_TASK_FILE_BYTES // 1024**2} MiB with its steps)")
    (tasks / f"{name}.json").write_text(text, encoding="utf-8")

    written = ", ".join(f"envs/{e}/" for e in plan.env_names())
    lines = [f"imported {folder} -> tasks/{name}.json, {written}, "
             f"artifacts/{name}{ARTIFACT_SUFFIX}/"]
    if plan.separate:
        lines.append(f"  verifier: its own container (envs/{name}{VERIFIER_SUFFIX}/, from "
                     "tests/Dockerfile), given the artifacts "
                     f"{', '.join(plan.verifier_artifacts or ()) or '(none)'} and "
                     "/logs/artifacts")
    lines += [f"  note: {note}" for note in plan.notes]
    if compose is not None:
        services = ", ".join(s.name for s in compose.sidecars) or "none"
        lines.append(f"  compose: main and its services ({services}) deploy as one multi env "
                     f"(envs/{name}/)")
        lines += [f"  note: {note}" for note in compose.notes]
    environment = settings.get("environment") or {}
    lines.append(f"  network: {policy} ("
                 + ("a route out, as [environment] allow_internet asks" if policy == "open"
                    else "no route out: [environment] allow_internet is false") + ")")
    unused = sorted(k for k in environment
                    if k not in ("build_timeout_sec", "allow_internet", "network_mode"))
    if unused:
        lines.append(f"  note: [environment] {', '.join(unused)} kept in task.toml, not "
                     "applied (env servers run with the sandbox's defaults)")
    for original, mapped, where in budget.mapped:
        lines.append(f"  image map: {where}: FROM {original} -> {mapped}")
    budget.mapped.clear()
    skipped = [p.relative_to(folder).as_posix() for p in budget.skipped if is_inside(p, folder)]
    if skipped:
        lines.append(f"  note: left out {', '.join(skipped)} (version control, caches and "
                     "folder litter are never part of a bundle)")
    if policy == "none" and DOWNLOADS.search(read_text(folder / "tests" / "test.sh")):
        lines.append("  note: tests/test.sh seems to download (pip, uv, curl, apt...); the env "
                     "has no route out, so install what it needs in environment/Dockerfile")
    return lines


def _env_value(value: str) -> str:
    """A value for a Dockerfile ``ENV`` line, quoted so spaces, quotes and ``$`` stay as
    written."""
    if "\n" in value or "\r" in value:
        raise UserError(f"an environment value holds a line break: {value[:60]!r}")
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$")
    return f'"{escaped}"'


def _write_compose_envs(name: str, compose: ComposePlan, output: Path, budget: Budget,
                        policy: str = "open") -> None:
    """The service envs and the multi env that deploys them with ``main``."""
    import tomlkit

    for sidecar in compose.sidecars:
        folder = output / "envs" / f"{name}-{sidecar.name}"
        settings = dict(sidecar.settings)
        if sidecar.context is not None:
            copy_tree(sidecar.context, folder, budget)
            text = read_text(folder / sidecar.dockerfile)
            text, mapped = map_images(text, budget.images)
            budget.mapped += [(a, b, f"service {sidecar.name}") for a, b in mapped]
            if mapped or sidecar.dockerfile != "Dockerfile":
                (folder / "Dockerfile").write_text(text, encoding="utf-8")
        else:
            folder.mkdir(parents=True)
            if settings.get("image") in budget.images:
                budget.mapped.append((settings["image"], budget.images[settings["image"]],
                                      f"service {sidecar.name}"))
                settings["image"] = budget.images[settings["image"]]
        (folder / "env.toml").write_text(
            "# a service of the Harbor task's docker-compose.yaml (agent-env bundle import)\n"
            + tomlkit.dumps({"type": "service", **settings}), encoding="utf-8")
    (output / "envs" / name).mkdir(parents=True)
    (output / "envs" / name / "env.toml").write_text(
        "# the Harbor task's docker-compose.yaml: main and its services as one env\n"
        + tomlkit.dumps({"type": "multi", "name": "harbor", "network_policy": policy,
                         "mcp_server_envs": [name + MAIN_SUFFIX],
                         "service_envs": [f"{name}-{s.name}" for s in compose.sidecars]}),
        encoding="utf-8")


def _main_env(bundle: Path, env: Path) -> Path | None:
    """``env`` itself, or for a multi env (a compose task) its MCP server's folder."""
    settings_file = env / "env.toml"
    if not settings_file.is_file():
        return env
    try:
        settings = tomllib.loads(read_text(settings_file))
    except (tomllib.TOMLDecodeError, UserError):
        return env
    if settings.get("type") != "multi":
        return env
    children = settings.get("mcp_server_envs") or []
    return _bundle_folder(bundle, "envs", children[0]) if children else None


def _export_one(bundle: Path, task: Path, output: Path, budget: Budget) -> str | None:
    """Write one task's Harbor folder; the reason it does not fit, else None."""
    try:
        steps = json.loads(read_text(task))
    except ValueError as exc:
        return f"not valid JSON ({exc})"
    if not isinstance(steps, list) or not all(isinstance(s, dict) for s in steps):
        return "not a list of steps"
    by_type: dict[str, list[dict[str, Any]]] = {}
    for step in steps:
        by_type.setdefault(str(step.get("type")), []).append(step)
    deploys, prompts = by_type.get("deploy_env", []), by_type.get("prompt_agent", [])
    verifiers = by_type.get("env_outcome_verifier", [])
    # a separate verifier's env is deployed too; its files come back from the tests
    deploys = [d for d in deploys if not (len(deploys) == 2 and str(d.get("env_id")).endswith(
        VERIFIER_SUFFIX))]
    if len(deploys) != 1 or len(prompts) != 1 or len(verifiers) != 1:
        return ("a Harbor task is one env, one prompt and one test run (deploy_env, "
                "prompt_agent, env_outcome_verifier once each)")
    env_id, artifact_id = deploys[0].get("env_id"), verifiers[0].get("file_artifact_id")
    env = _bundle_folder(bundle, "envs", env_id)
    artifact = _bundle_folder(bundle, "artifacts", artifact_id)
    if env is None:
        return f"env_id {env_id!r} names no folder in envs/ (a plain name, not a path)"
    if artifact is None:
        return (f"file_artifact_id {artifact_id!r} names no folder in artifacts/ (a plain "
                "name, not a path)")
    env = _main_env(bundle, env)
    if env is None:
        return f"env {env_id} is a multi env whose mcp_server_envs name no env folder"
    dockerfile = env / "Dockerfile"
    if not dockerfile.is_file() or MARKER not in read_text(dockerfile):
        return f"env {env.name} is not a Harbor container (its Dockerfile has no import marker)"
    if not (artifact / "tests" / "test.sh").is_file() or not (artifact / "task.toml").is_file():
        return f"artifact {artifact.name} has no tests/test.sh and task.toml"
    prompt = prompts[0].get("prompt")
    if not isinstance(prompt, str) or not prompt:
        return "its prompt_agent has no text prompt"

    target = output / task.stem
    copy_tree(env, target / "environment", budget, skip=frozenset({SHELL_FILE, "env.toml"}))
    text = read_text(dockerfile)
    cut = text.index(MARKER)
    (target / "environment" / "Dockerfile").write_text(unmap_images(text[:cut], text[cut:]),
                                                       encoding="utf-8")
    for kept in KEPT:
        source = artifact / kept
        if source.is_dir() and not source.is_symlink():
            copy_tree(source, target / kept, budget)
        elif os.path.lexists(source):
            copy_file(source, target / kept, budget)
    (target / "instruction.md").write_text(prompt, encoding="utf-8")  # the prompt as edited
    return None
