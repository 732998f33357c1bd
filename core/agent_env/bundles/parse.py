"""Reading a bundle folder into a :class:`Bundle`, collecting every problem on the way.

Parsing never stops at the first problem: the caller reports them all together, each prefixed
with the file it is about (``tasks/x.json:3: ...``), so one edit-run cycle fixes them all.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from pathlib import Path
from typing import Any

import attrs

from agent_env.bundles.jsonfile import MAX_FILE_BYTES, StrictJSONError, loads_strict_bytes
from agent_env.bundles.model import (
    BUNDLE_FOLDERS,
    AgentEntry,
    ArtifactEntry,
    Bundle,
    BundleFile,
    EnvEntry,
    EvalEntry,
    TaskEntry,
)
from agent_env.env_types import DEFAULT_ENV_TYPE
from agent_env.errors import UserError
from agent_env.tasks.artifacts import (
    CLI,
    DOCKER_IMAGE,
    ENVIRONMENT,
    ENVIRONMENT_UNIVERSE,
    FILE,
    FILE_UNIVERSE,
    SKILL,
    SKILL_FILE,
    CliSpec,
    universe_layout,
)

_CARD = re.compile(r"@environment_card\(\s*name\s*=\s*[\"']([^\"']+)[\"']")


def ignored(name: str) -> bool:
    """Dot entries and ``__pycache__`` directly in a bundle's ``tasks/``, ``envs/``,
    ``artifacts/``... are not tasks, envs or artifacts (editor and OS litter). The files inside
    an artifact or env follow :func:`file_dropped` and :func:`context_dropped` instead."""
    return name.startswith(".") or name == "__pycache__"


#: What a build context never keeps, whatever its ``.dockerignore`` says: version-control
#: metadata and bytecode caches, which no image means to hold and which would change the
#: digest on every checkout or import.
CONTEXT_DROPPED = frozenset({".git", ".hg", ".svn", "__pycache__"})


#: What a file artifact or skill never keeps: :data:`CONTEXT_DROPPED` and macOS's folder
#: litter. Every other file goes, dot-files and dot-folders too: a task's ``tests/.truth/``
#: must reach the container as it was written.
FILE_DROPPED = CONTEXT_DROPPED | {".DS_Store"}


def file_dropped(name: str) -> bool:
    return name in FILE_DROPPED


def context_dropped(name: str) -> bool:
    """A build context (an env folder, an image artifact, ``env mcp-server put --context``)
    keeps its dot-files, as ``docker build`` sends them, so that ``.dockerignore`` is what
    decides (a ``COPY .npmrc`` works and a listed ``secret.json`` is never stored or sent);
    only :data:`CONTEXT_DROPPED` goes."""
    return name in CONTEXT_DROPPED


def _entries(folder: Path) -> list[Path]:
    try:
        return sorted(p for p in folder.iterdir() if not ignored(p.name))
    except OSError:
        return []


def is_bundle(folder: Path) -> bool:
    return any((folder / name).is_dir() for name in BUNDLE_FOLDERS)


def parse_bundle(folder: Path, id_root: str) -> tuple[Bundle, list[str]]:
    """The bundle in ``folder`` and every problem found in it (an empty list: all good)."""
    folder = folder.resolve()
    if not folder.is_dir():
        raise UserError(f"{folder} is not a folder")
    if not is_bundle(folder):
        raise UserError(
            f"{folder} is not a bundle: it has none of "
            f"{', '.join(name + '/' for name in BUNDLE_FOLDERS)}"
        )
    problems: list[str] = []
    includes: dict[str, list[str]] = {}
    artifacts = [a for p in _entries(folder / "artifacts")
                 if (a := _parse_artifact(p, id_root, problems, includes)) is not None]
    artifacts = _with_included_environments(artifacts, includes, problems)
    envs = [e for p in _entries(folder / "envs")
            if (e := _parse_env(p, id_root, problems)) is not None]
    tasks = [t for p in _entries(folder / "tasks")
             if (t := _parse_task(p, id_root, problems)) is not None]
    # a walrus target lives in the function's scope: reusing ``e`` would retype the env list's
    evals = [v for p in _entries(folder / "evals")
             if (v := _parse_eval(p, id_root, problems)) is not None]
    agents = [g for p in _entries(folder / "agents")
              if (g := _parse_agent(p, id_root, problems)) is not None]
    # skills are artifacts (a task names one by name, as an artifact), in a folder of their own
    taken = {a.name for a in artifacts}
    for path in _entries(folder / "skills"):
        skill = _parse_skill(path, id_root, problems)
        if skill is not None and skill.name in taken:
            problems.append(f"artifacts/{skill.name} and {skill.label} share a name; artifacts "
                            "and skills share one store, so rename one")
        elif skill is not None:
            artifacts.append(skill)
    bundle = Bundle(
        folder, id_root, read_description(folder, problems), tuple(tasks), tuple(artifacts),
        tuple(envs),
        tuple(evals), _parse_aliases(folder, problems), tuple(agents),
    )
    names = {t.name for t in tasks}
    for entry in evals:
        for task_name in entry.task_names:
            if bundle.task(task_name) is None:
                problems.append(f"{entry.label}: task '{task_name}' names no file in tasks/ "
                                f"(tasks: {', '.join(sorted(names)) or 'none'})")
    return bundle, problems


#: The most a bundle's README.md, env.toml, artifact.toml or aliases.toml may hold.
MAX_SMALL_FILE_BYTES = 1024 * 1024


class OwnFileError(Exception):
    """A bundle file that may not be read: out of its folder, not a regular file, too big."""


def is_inside(path: str | Path, folder: str | Path) -> bool:
    """Whether ``path`` (which need not exist) is ``folder`` or lies under it, links
    resolved: the one test of "does this stay in its folder" for bundle reads, conversion
    outputs and copies."""
    real, root = os.path.realpath(path), os.path.realpath(folder)
    return real == root or real.startswith(root.rstrip(os.sep) + os.sep)


def read_own(path: Path, folder: Path, cap: int = MAX_SMALL_FILE_BYTES) -> bytes:
    """``path``'s bytes, under the bundle's rules for every file it reads: it resolves inside
    ``folder`` (a symlink may not lead out), is a regular file (not a device or a FIFO) and
    holds at most ``cap`` bytes. Raises :class:`OwnFileError` saying which rule, or OSError."""
    real = os.path.realpath(path)
    if not is_inside(real, folder):
        raise OwnFileError(f"is a symlink out of its folder (to {real}); a bundle may only "
                           "hold its own files")
    if not stat.S_ISREG(os.stat(real).st_mode):
        raise OwnFileError("is not a regular file")
    with open(real, "rb") as handle:
        data = handle.read(cap + 1)
    if len(data) > cap:
        raise OwnFileError(f"is larger than {cap // 1024} KB")
    return data


def read_description(folder: Path, problems: list[str] | None = None) -> str:
    """The first line of text of ``README.md`` (headings' ``#`` dropped)."""
    readme = folder / "README.md"
    if not os.path.lexists(readme):
        return ""
    try:
        text = read_own(readme, folder).decode("utf-8")
    except OwnFileError as exc:
        if problems is not None:
            problems.append(f"README.md {exc}")
        return ""
    except (OSError, UnicodeDecodeError):
        return ""
    for line in text.splitlines():
        line = line.strip().lstrip("#").strip()
        if line:
            return line
    return ""


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def not_utf8_name(name: str) -> str | None:
    """How to show a file name that is not UTF-8 (``caf\\xe9.txt``), or None when it is: such a
    name has no form in object keys, JSON or the stores, so it is refused, not mangled."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        raw = name.encode("utf-8", "surrogateescape")
        return raw.decode("ascii", "backslashreplace")
    return None


def _context_ignore(folder: Path, label: str, problems: list[str], dockerfile: str) -> Any:
    """The build context's ``.dockerignore`` (with the Dockerfile and itself always kept, as
    the Docker CLI does), or None when it cannot be read (a problem says why)."""
    from agent_env.images.context import DockerIgnore, dockerignore_lines

    path = folder / ".dockerignore"
    lines: list[str] = []
    if os.path.lexists(path):
        try:
            lines = dockerignore_lines(read_own(path, folder).decode("utf-8"))
        except (OwnFileError, OSError, UnicodeDecodeError) as exc:
            problems.append(f"{label}/.dockerignore: cannot be read ({exc})")
            return None
    try:
        return DockerIgnore.parse([*lines, f"!{dockerfile}", "!.dockerignore"])
    except UserError as exc:
        problems.append(f"{label}/.dockerignore: {exc}")
        return None


def collect_files(folder: Path, label: str, problems: list[str], *,
                  build_context: bool = False, dockerfile: str = "Dockerfile",
                  ) -> list[BundleFile]:
    """Every file under ``folder``; symlinks must stay in; names must be UTF-8.

    Without ``build_context`` only :data:`FILE_DROPPED` is skipped. With it, the files are
    exactly what ``docker build`` would send from ``folder`` (its ``.dockerignore`` applied,
    dot files kept) less :data:`CONTEXT_DROPPED`, so what is stored, hashed and built is one
    set and an ignored file never leaves the machine."""
    root = os.path.realpath(folder)
    found: list[BundleFile] = []
    skip = context_dropped if build_context else file_dropped
    ignore = _context_ignore(folder, label, problems, dockerfile) if build_context else None
    if build_context and ignore is None:
        return found

    def excluded(relative: str, is_dir: bool) -> bool:
        if ignore is None or not ignore.excludes(relative):
            return False
        return not (is_dir and ignore.may_include_below(relative))

    for current, dirs, files in os.walk(folder, followlinks=False):
        here = os.path.relpath(current, folder)
        prefix = "" if here == "." else Path(here).as_posix() + "/"
        dirs[:] = [d for d in dirs if not skip(d) and not excluded(prefix + d, True)]
        files = [f for f in files if not skip(f)
                 and not (ignore is not None and ignore.excludes(prefix + f))]
        for name in [*dirs, *files]:  # what is left out is never read, so never judged
            shown = not_utf8_name(os.path.normpath(os.path.join(here, name)))
            if shown is not None:
                problems.append(f"{label}: {shown} is not a UTF-8 file name (rename it)")
        dirs[:] = sorted(d for d in dirs if not_utf8_name(d) is None)
        files = [f for f in files if not_utf8_name(f) is None]
        for name in list(dirs):
            full = os.path.join(current, name)
            if os.path.islink(full):
                dirs.remove(name)
                problems.append(_escape_problem(label, folder, full, root) or
                                f"{label}: {os.path.relpath(full, folder)} is a symlink to a "
                                "folder (copy the files in instead)")
        for name in sorted(files):
            full = os.path.join(current, name)
            relative = Path(os.path.relpath(full, folder)).as_posix()
            problem = _escape_problem(label, folder, full, root)
            if problem:
                problems.append(problem)
                continue
            path = Path(full)
            if not path.is_file():
                problems.append(f"{label}: {relative} is not a regular file")
                continue
            stat = path.stat()
            mode = 0o755 if stat.st_mode & 0o111 else 0o644
            found.append(BundleFile(relative, path, _sha256(path), stat.st_size, mode))
    return found


def _escape_problem(label: str, folder: Path, full: str, root: str) -> str | None:
    resolved = os.path.realpath(full)
    if resolved == root or resolved.startswith(root + os.sep):
        return None
    relative = os.path.relpath(full, folder)
    return (f"{label}: {relative} is a symlink out of its folder (to {resolved}); "
            "a bundle may only hold its own files")


def _read_toml(path: Path, label: str, problems: list[str]) -> dict[str, Any] | None:
    from tomlkit.exceptions import ParseError

    from agent_env.config import loads_toml

    try:
        return loads_toml(read_own(path, path.parent).decode("utf-8"))
    except ParseError as exc:
        problems.append(f"{label}:{exc.line}: invalid TOML ({str(exc).split(' at line')[0]})")
    except OwnFileError as exc:
        problems.append(f"{label} {exc}")
    except UnicodeDecodeError as exc:
        problems.append(f"{label}: not UTF-8 text (byte 0x{exc.object[exc.start]:02x})")
    except OSError as exc:
        problems.append(f"{label}: cannot read it ({exc.strerror or exc})")
    return None


def _parse_artifact(path: Path, id_root: str, problems: list[str],
                    includes: dict[str, list[str]] | None = None) -> ArtifactEntry | None:
    label = f"artifacts/{path.name}"
    if path.is_file():  # artifacts/<name>.<ext>: a one-file artifact named by its stem
        problem = _escape_problem(label, path.parent, str(path), os.path.realpath(path.parent))
        if problem:
            problems.append(problem)
            return None
        stat = path.stat()
        one = BundleFile(path.name, path, _sha256(path), stat.st_size,
                         0o755 if stat.st_mode & 0o111 else 0o644)
        return ArtifactEntry(path.stem, f"{id_root}/{path.stem}", FILE, label, (one,))
    # an image artifact is a build context: what docker build would send is what is stored
    files = collect_files(path, label, problems,
                          build_context=(path / "Dockerfile").is_file())
    declared = None
    data: dict[str, Any] = {}
    if (path / "artifact.toml").is_file():
        data = _read_toml(path / "artifact.toml", f"{label}/artifact.toml", problems) or {}
        declared = data.get("type")
        files = [f for f in files if f.path != "artifact.toml"]
    if declared == CLI:
        return _cli_artifact(path.name, f"{id_root}/{path.name}", label, data, files, problems)
    if declared in (ENVIRONMENT, ENVIRONMENT_UNIVERSE):
        return _environment_artifact(path.name, f"{id_root}/{path.name}", label, str(declared),
                                     data, files, problems, includes)
    if declared:
        kind = str(declared)
    elif any(f.path == "Dockerfile" for f in files):
        kind = DOCKER_IMAGE
    elif len(files) == 1:
        kind = FILE
    else:
        kind = FILE_UNIVERSE
    if not files:
        problems.append(f"{label}: the artifact folder is empty")
    return ArtifactEntry(path.name, f"{id_root}/{path.name}", kind, label, tuple(files))


def _cli_artifact(name: str, artifact_id: str, label: str, data: dict[str, Any],
                  files: list[BundleFile], problems: list[str]) -> ArtifactEntry | None:
    """A ``cli`` artifact: its files, and the ``entrypoint`` and ``command_name`` its
    artifact.toml names (as the reference's)."""
    toml = f"{label}/artifact.toml"
    found = len(problems)
    unknown = sorted(k for k in data if k not in ("type", "command_name", "entrypoint"))
    if unknown:
        problems.append(f"{toml}: unknown key(s) {', '.join(unknown)} (an artifact of type "
                        "'cli' takes: type, command_name, entrypoint)")
    named = {k: data.get(k) for k in ("command_name", "entrypoint")}
    for key, value in named.items():
        if not isinstance(value, str) or not value:
            problems.append(f"{toml}: {key} is required (the command's "
                            f"{'name' if key == 'command_name' else 'file, a path in it'})")
    if len(problems) > found:
        return None
    spec = CliSpec(str(named["command_name"]), str(named["entrypoint"]))
    problems.extend(f"{toml}: {problem}" for problem in spec.problems(f.path for f in files))
    if len(problems) > found:
        return None
    return ArtifactEntry(name, artifact_id, CLI, label, tuple(files), cli=spec)


#: What the artifact.toml of an environment (universe) artifact may say.
_ENVIRONMENT_KEYS = {ENVIRONMENT: ("type", "environment_name", "description"),
                     ENVIRONMENT_UNIVERSE: ("type", "environment_artifacts")}


def _environment_artifact(name: str, artifact_id: str, label: str, kind: str,
                          data: dict[str, Any], files: list[BundleFile], problems: list[str],
                          includes: dict[str, list[str]] | None) -> ArtifactEntry | None:
    """An ``environment`` artifact (one file and the ``environment_name`` it seeds) or an
    ``environment_universe`` (a folder per environment, see :func:`universe_layout`), checked
    as the reference's artifact.toml reads them."""
    toml = f"{label}/artifact.toml"
    found = len(problems)
    allowed = _ENVIRONMENT_KEYS[kind]
    if "file" in data and kind == ENVIRONMENT:
        problems.append(f"{toml}: file (wrapping another artifact's file) is not supported "
                        "here; put the one file in this folder and leave file out")
    unknown = sorted(k for k in data if k not in allowed and k != "file")
    if unknown:
        problems.append(f"{toml}: unknown key(s) {', '.join(unknown)} (an artifact of type "
                        f"'{kind}' takes: {', '.join(allowed)})")
    environment_name: str | None = None
    if kind == ENVIRONMENT:
        environment_name = data.get("environment_name")
        if not isinstance(environment_name, str) or not environment_name.strip():
            problems.append(f"{toml}: environment_name is required: the name of the env "
                            "server the file seeds")
            environment_name = None
        if len(files) != 1:
            problems.append(f"{label}: an environment artifact holds one file besides "
                            f"artifact.toml, and has {len(files)}")
    else:
        named = data.get("environment_artifacts", [])
        if not isinstance(named, list) or not all(isinstance(n, str) and n for n in named):
            problems.append(f"{toml}: environment_artifacts must be a list of the names of "
                            "this bundle's environment artifacts")
            named = []
        if files or not named:
            _, more = universe_layout(f.path for f in files)
            problems.extend(f"{label}: {problem}" for problem in more)
        if includes is not None and named:
            includes[name] = list(named)
    if len(problems) > found:
        return None
    return ArtifactEntry(name, artifact_id, kind, label, tuple(files), environment_name)


def _with_included_environments(artifacts: list[ArtifactEntry],
                                includes: dict[str, list[str]],
                                problems: list[str]) -> list[ArtifactEntry]:
    """Universes with the environment artifacts their ``environment_artifacts`` name added as
    ``<environment_name>/<file>``; a name that is no environment artifact of the bundle, or an
    environment the universe already holds, is a problem."""
    if not includes:
        return artifacts
    by_name = {a.name: a for a in artifacts}
    out = []
    for entry in artifacts:
        named = includes.get(entry.name)
        if not named:
            out.append(entry)
            continue
        layout, _ = universe_layout(f.path for f in entry.files)
        held = set(layout.environments)
        files = list(entry.files)
        for other_name in named:
            other = by_name.get(other_name)
            if other is None or other.type != ENVIRONMENT or other.environment_name is None:
                problems.append(f"{entry.label}/artifact.toml: environment_artifacts names "
                                f"'{other_name}', which is no environment artifact of this "
                                "bundle")
                continue
            if other.environment_name in held:
                problems.append(f"{entry.label}: two of its environments are named "
                                f"'{other.environment_name}' (a universe's environments need "
                                "names of their own)")
                continue
            held.add(other.environment_name)
            one = other.files[0]
            files.append(attrs.evolve(one, path=f"{other.environment_name}/"
                                               f"{one.path.rpartition('/')[2]}"))
        out.append(attrs.evolve(entry, files=tuple(sorted(files, key=lambda f: f.path))))
    return out


#: The env.toml keys the kernel reads itself, whatever the env's type.
_ENV_KEYS = frozenset({"type", "image", "environment_name", "id"})


def _parse_env(path: Path, id_root: str, problems: list[str]) -> EnvEntry | None:
    label = f"envs/{path.name}"
    if not path.is_dir():
        problems.append(f"{label}: an env is a folder (a Docker build context), not a file")
        return None
    files = collect_files(path, label, problems, build_context=True)
    settings: dict[str, Any] = {}
    if (path / "env.toml").is_file():
        settings = _read_toml(path / "env.toml", f"{label}/env.toml", problems) or {}
    elif not (path / "Dockerfile").is_file():
        problems.append(f"{label}: needs a Dockerfile or an env.toml")
    declared = settings.get("type", DEFAULT_ENV_TYPE)
    # the keys beyond the kernel's are the env type's to read and check (bundle_problems)
    own = {k: v for k, v in settings.items() if k not in _ENV_KEYS}
    if not isinstance(declared, str) or not declared:
        problems.append(f"{label}/env.toml: type must be the name of an env type (such as "
                        f"\"{DEFAULT_ENV_TYPE}\"), not {declared!r}")
        declared = DEFAULT_ENV_TYPE
    env_type = declared
    name = settings.get("environment_name")
    if not name and env_type == DEFAULT_ENV_TYPE:
        cards = set()
        for item in files:
            if item.path.endswith(".py"):
                text = item.source.read_text(encoding="utf-8", errors="replace")
                cards.update(_CARD.findall(text))
        if len(cards) == 1:
            name = cards.pop()
        else:
            problems.append(
                f"{label}: cannot tell the environment's name: give environment_name in "
                f"env.toml, or exactly one @environment_card(name=...) (found {len(cards)})"
            )
    entity_id = str(settings.get("id") or f"{id_root}/{path.name}")
    return EnvEntry(path.name, entity_id, env_type, label, path, tuple(files),
                    settings.get("image"), name, own)


def _parse_skill(path: Path, id_root: str, problems: list[str]) -> ArtifactEntry | None:
    """``skills/<name>``: a folder holding ``SKILL.md`` (and the files beside it), stored as an
    artifact a ``deploy_agent`` step's ``skills`` name by ``artifact_id``."""
    label = f"skills/{path.name}"
    if not path.is_dir() or not (path / SKILL_FILE).is_file():
        problems.append(f"{label}: a skill is a folder holding {SKILL_FILE}")
        return None
    files = collect_files(path, label, problems)
    return ArtifactEntry(path.name, f"{id_root}/{path.name}", SKILL, label, tuple(files))


def _parse_agent(path: Path, id_root: str, problems: list[str]) -> AgentEntry | None:
    """``agents/<name>``: its files as a build context, checked as a folder; what its
    ``agent.toml`` says is the agents plugin's to read (when a task deploys it)."""
    from agent_env.agents import AGENT_FILE

    label = f"agents/{path.name}"
    if not path.is_dir():
        problems.append(f"{label}: an agent is a folder (a Dockerfile, an {AGENT_FILE} or "
                        "both), not a file")
        return None
    dockerfile = "Dockerfile"
    if (path / AGENT_FILE).is_file():
        settings = _read_toml(path / AGENT_FILE, f"{label}/{AGENT_FILE}", problems) or {}
        if isinstance(settings.get("dockerfile"), str):
            dockerfile = settings["dockerfile"]
    elif not (path / "Dockerfile").is_file():
        problems.append(f"{label}: needs a Dockerfile or an {AGENT_FILE}")
        return None
    files = collect_files(path, label, problems, build_context=True, dockerfile=dockerfile)
    return AgentEntry(path.name, f"{id_root}/{path.name}", label, path, tuple(files))


def _parse_task(path: Path, id_root: str, problems: list[str]) -> TaskEntry | None:
    shown = not_utf8_name(path.name)
    if shown is not None:
        problems.append(f"tasks/{shown}: not a UTF-8 file name (rename it)")
        return None
    label = f"tasks/{path.name}"
    if path.suffix != ".json" or not os.path.lexists(path):
        return None
    try:
        data = loads_strict_bytes(read_own(path, path.parent, MAX_FILE_BYTES + 1))
    except StrictJSONError as exc:
        problems.append(f"{exc.where(label)}: {exc.message}")
        return None
    except OwnFileError as exc:
        problems.append(f"{label} {exc}")
        return None
    except OSError as exc:
        problems.append(f"{label}: cannot read it ({exc})")
        return None
    if isinstance(data, dict) and isinstance(data.get("steps"), list):
        data = data["steps"]  # the object `task get` prints
    if not isinstance(data, list):
        problems.append(f"{label}: must be a JSON array of step objects (or an object with "
                        "steps), not "
                        f"{'an object' if isinstance(data, dict) else type(data).__name__}")
        return None
    from agent_env.tasks.plan import normalise_step

    data = [normalise_step(step) for step in data]
    bad = [i for i, step in enumerate(data, start=1) if not isinstance(step, dict)]
    for position in bad:
        problems.append(f"{label}: step {position} must be an object")
    if not data:
        problems.append(f"{label}: has no steps")
    return TaskEntry(path.stem, f"{id_root}/{path.stem}", label, tuple(data))


def _parse_eval(path: Path, id_root: str, problems: list[str]) -> EvalEntry | None:
    label = f"evals/{path.name}"
    if path.suffix != ".toml" or not path.is_file():
        return None
    data = _read_toml(path, label, problems)
    if data is None:
        return None
    tasks = data.get("tasks")
    if not (isinstance(tasks, list) and all(isinstance(t, str) for t in tasks)):
        problems.append(f"{label}: 'tasks' must be a list of task file names")
        tasks = []
    unknown = sorted(set(data) - {"tasks", "type", "id"})
    if unknown:
        problems.append(f"{label}: unknown key(s) {', '.join(unknown)} (known: id, tasks, type)")
    entity_id = str(data.get("id") or f"{id_root}/{path.stem}")
    return EvalEntry(path.stem, entity_id, label, tuple(tasks), data.get("type"))


def _parse_aliases(folder: Path, problems: list[str]) -> dict[str, dict[str, str]]:
    path = folder / "aliases.toml"
    if not path.is_file():
        return {}
    data = _read_toml(path, "aliases.toml", problems) or {}
    aliases: dict[str, dict[str, str]] = {}
    for kind, table in data.items():
        if not isinstance(table, dict):
            problems.append(f"aliases.toml: [{kind}] must be a table of name = [aliases]")
            continue
        for name, names in table.items():
            if not (isinstance(names, list) and all(isinstance(n, str) for n in names)):
                problems.append(f"aliases.toml: {kind}.{name} must be a list of aliases")
                continue
            for alias in names:
                aliases.setdefault(kind, {})[alias] = name
    return aliases
