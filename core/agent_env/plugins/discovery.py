"""Finding plugins: the built-in modules, the ``agent_env`` entry points, and what became of each.

Kept apart from the registries because it answers a different question (which plugins exist
and did they load?) and because ``agent-env plugin add`` re-runs it after installing.
Discovery is defensive: a plugin whose requirement on ``agentenv-framework`` excludes the
running version is refused *before* it is imported, and one that raises while importing is
recorded as ``failed`` with the reason, never taking the CLI down.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import re
import sys
import threading
import traceback
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import attrs

ENTRY_POINT_GROUP = "agent_env"
CORE_DISTRIBUTION = "agentenv-framework"

#: The kernel's own plugins, registered exactly like outside ones (as pytest's default_plugins).
BUILTIN_PLUGINS: tuple[str, ...] = (
    "agent_env.cli.builtin_commands",
    "agent_env.stores.builtin",
    "agent_env.sandbox.builtin",
    "agent_env.tasks.builtin_steps",
    "agent_env.plugins.configured",
    "agent_env.bundles.shipped",
    "agent_env.runners.builtin",
    "agent_env.cli.reporter",
)

# Statuses shown by ``agent-env plugin list``; reasons are stable codes for ``--json``.
ACTIVE, FAILED, SKIPPED, CONFLICT, UNLOADED = "active", "failed", "skipped", "conflict", "unloaded"


@attrs.define
class PluginRecord:
    """One plugin module and what became of it."""

    name: str
    distribution: str
    version: str
    module: str
    builtin: bool = False
    status: str = UNLOADED
    reason: str | None = None
    detail: str | None = None
    traceback: str | None = attrs.field(default=None, repr=False)
    plugin: ModuleType | None = attrs.field(default=None, repr=False)

    def names(self) -> set[str]:
        """The normalised names a user may call this plugin by (entry point, distribution)."""
        return {normalise(self.name), normalise(self.distribution)}

    def fail(self, reason: str, detail: str, tb: str | None = None) -> None:
        self.status, self.reason, self.detail = FAILED, reason, detail
        if tb is not None:
            self.traceback = tb


def core_version() -> str:
    from agent_env._version import VERSION

    return VERSION


def normalise(name: str) -> str:
    """A distribution or plugin name as packaging compares it (``Foo_Bar`` = ``foo-bar``)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def names_from_env(variable: str) -> set[str] | None:
    raw = os.environ.get(variable)
    if raw is None:
        return None
    return {normalise(part) for part in raw.split(",") if part.strip()}


#: Whether what the current thread or task prints goes to stderr (:func:`stdout_to_stderr`).
_TO_STDERR: contextvars.ContextVar[bool] = contextvars.ContextVar("agentenv_stdout_to_stderr",
                                                                  default=False)
_INSTALL = threading.Lock()


class _RoutedStdout:
    """``sys.stdout`` while plugins run: a write goes to stderr in a thread or task inside
    :func:`stdout_to_stderr`, to the real stdout everywhere else; anything else is the real
    stream's."""

    def __init__(self, real: Any) -> None:
        self.real = real

    def write(self, text: str) -> int:
        return int((sys.stderr if _TO_STDERR.get() else self.real).write(text))

    def flush(self) -> None:
        (sys.stderr if _TO_STDERR.get() else self.real).flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)


def unrouted_stdout() -> Any:
    """The stream ``sys.stdout`` stands for, without the plugin routing: what a printer made
    now keeps writing to, even from inside a hook (the run's own reporter is one)."""
    stream = sys.stdout
    return stream.real if isinstance(stream, _RoutedStdout) else stream


@contextlib.contextmanager
def stdout_to_stderr() -> Iterator[None]:
    """What a plugin prints goes to stderr, so ``--json`` output stays clean.

    Why not ``contextlib.redirect_stdout``: it swaps the process-wide ``sys.stdout``, and
    hooks run in worker threads too; two redirects that end out of order left ``sys.stdout``
    pointing at stderr for good (a run's summary then went to stderr), and while one was on,
    the main thread's own lines went to stderr as well. Here the choice is per thread and task
    (a context variable), read by one routing stream installed once."""
    with _INSTALL:
        if not isinstance(sys.stdout, _RoutedStdout):
            sys.stdout = _RoutedStdout(sys.stdout)
    token = _TO_STDERR.set(True)
    try:
        yield
    finally:
        _TO_STDERR.reset(token)


@attrs.frozen
class Distribution:
    """What discovery needs of an installed distribution: its name, version, requirements."""

    name: str
    version: str
    requires: tuple[str, ...] = ()


@attrs.frozen
class EntryPoint:
    """One ``agent_env`` entry point: ``name = module:attribute`` of ``dist``."""

    name: str
    value: str
    dist: Distribution

    def load(self) -> Any:
        from agent_env.contributions import import_target

        return import_target(self.value)


@attrs.frozen
class ReferencePlugin:
    """A distribution's entry points in the reference framework's groups that load here, as one
    plugin: its ``agent_env.task_steps`` (step types written for the reference, offered through
    :mod:`agent_env.task_step.adapter`) and its ``agent_env.bundles`` (``<name> = "<package>"``:
    the bundle folder ``<package>/<name>/``, found without importing the package's code)."""

    dist: Distribution
    steps: tuple[EntryPoint, ...] = ()
    bundles: tuple[EntryPoint, ...] = ()

    def load(self) -> ModuleType:
        from agent_env.hookspecs import hookimpl
        from agent_env.task_step.adapter import reference_steps_plugin

        module = reference_steps_plugin(self.dist.name, {e.name: e.load() for e in self.steps})
        sources = [_bundle_source(e) for e in self.bundles]

        @hookimpl
        def agent_env_bundles() -> list[Any]:
            return sources

        module.agent_env_bundles = agent_env_bundles  # type: ignore[attr-defined]
        return module


def _bundle_source(entry: EntryPoint) -> Any:
    """The bundle folder an ``agent_env.bundles`` entry point names; ImportError saying what is
    missing."""
    import importlib.util

    from agent_env.contributions import BundleSource

    package = entry.value.strip()
    top, _, rest = package.partition(".")
    spec = importlib.util.find_spec(top)
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    if not locations:
        raise ImportError(f"its bundle {entry.name} names package {package!r}, which is not "
                          "installed as a package")
    folder = os.path.join(locations[0], *filter(None, rest.split(".")), entry.name)
    if not os.path.isdir(folder):
        raise ImportError(f"its bundle {entry.name} has no folder {folder}")
    return BundleSource(entry.name, folder)


def entry_points() -> Iterator[tuple[PluginRecord, EntryPoint | ReferencePlugin]]:
    """A record (not yet loaded) for every ``agent_env`` entry point, each distribution once,
    and one for each distribution's entry points in the reference framework's groups that load
    here too (:class:`ReferencePlugin`).

    Read straight from the ``*.dist-info`` / ``*.egg-info`` folders on ``sys.path`` rather than
    through ``importlib.metadata``, whose import alone costs about 20 ms of every CLI start;
    only distributions that declare a group read here have their metadata read.
    """
    seen: set[tuple[str, str, str]] = set()
    reference: dict[str, dict[str, list[EntryPoint]]] = {}
    for group, entry_point in _scan((ENTRY_POINT_GROUP, *LOADED_REFERENCE_GROUPS)):
        key = (normalise(entry_point.dist.name), group, entry_point.name)
        if key in seen:  # the same distribution seen twice on sys.path: the first one wins
            continue
        seen.add(key)
        dist = entry_point.dist
        if group in LOADED_REFERENCE_GROUPS:
            reference.setdefault(dist.name, {}).setdefault(group, []).append(entry_point)
            continue
        yield PluginRecord(entry_point.name, dist.name, dist.version, entry_point.value), \
            entry_point
    for groups in reference.values():
        dist = next(iter(groups.values()))[0].dist
        listed = "; ".join(f"[{group}] " + ", ".join(f"{e.name} = {e.value}" for e in entries)
                           for group, entries in groups.items())
        yield PluginRecord(normalise(dist.name), dist.name, dist.version, listed), \
            ReferencePlugin(dist, tuple(groups.get(REFERENCE_STEP_GROUP, ())),
                            tuple(groups.get(REFERENCE_BUNDLE_GROUP, ())))


#: The entry-point groups of the framework AgentEnv is modelled on. Its step types
#: (:data:`REFERENCE_STEP_GROUP`) load here; a distribution that declares others is listed by
#: ``plugin list`` as ``foreign`` for those, with what it would need.
REFERENCE_GROUPS = tuple(f"agent_env.{name}" for name in (
    "envs", "task_steps", "sandbox_providers", "env_providers", "state_providers", "artifacts",
    "explorer_plugins", "cli_plugins", "cli_root_options", "bundles"))
REFERENCE_STEP_GROUP = "agent_env.task_steps"
REFERENCE_BUNDLE_GROUP = "agent_env.bundles"
#: The reference's groups loaded here (:class:`ReferencePlugin`); the others are ``foreign``.
LOADED_REFERENCE_GROUPS = (REFERENCE_STEP_GROUP, REFERENCE_BUNDLE_GROUP)


@attrs.frozen
class ForeignPlugin:
    """An installed distribution that extends the reference framework, not this one."""

    distribution: str
    version: str
    #: group -> the entry-point names it declares there
    groups: dict[str, tuple[str, ...]]


def foreign_plugins() -> list[ForeignPlugin]:
    """Distributions declaring reference entry-point groups and no ``agent_env`` one (one pass
    over the installed distributions' entry_points.txt; only ``plugin list`` asks)."""
    found: dict[str, ForeignPlugin] = {}
    for folder in sys.path:
        try:
            names = sorted(os.listdir(folder or "."))
        except OSError:
            continue
        for name in names:
            if not name.endswith((".dist-info", ".egg-info")):
                continue
            info = os.path.join(folder or ".", name)
            declared = _entries_by_group(os.path.join(info, "entry_points.txt"))
            groups = {g: tuple(n for n, _ in declared[g]) for g in REFERENCE_GROUPS
                      if declared.get(g) and g not in LOADED_REFERENCE_GROUPS}
            if not groups or declared.get(ENTRY_POINT_GROUP):
                continue
            dist = _distribution(info)
            if dist is not None and normalise(dist.name) not in found:
                found[normalise(dist.name)] = ForeignPlugin(dist.name, dist.version, groups)
    return sorted(found.values(), key=lambda f: normalise(f.distribution))


def _scan(groups: tuple[str, ...]) -> Iterator[tuple[str, EntryPoint]]:
    """``(group, entry point)`` for each entry of ``groups``, in one pass over ``sys.path``."""
    for folder in sys.path:
        try:
            names = sorted(os.listdir(folder or "."))
        except OSError:
            continue
        for name in names:
            if not name.endswith((".dist-info", ".egg-info")):
                continue
            info = os.path.join(folder or ".", name)
            declared = _entries_by_group(os.path.join(info, "entry_points.txt"), groups)
            if not declared:
                continue
            dist = _distribution(info)
            if dist is None:
                continue
            for group in groups:
                for entry_name, value in declared.get(group, ()):
                    yield group, EntryPoint(entry_name, value, dist)


def _entries_by_group(path: str, only: tuple[str, ...] | None = None,
                      ) -> dict[str, list[tuple[str, str]]]:
    """Every group's ``name = value`` lines in an entry_points.txt (or those of ``only``)."""
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except OSError:
        return {}
    found: dict[str, list[tuple[str, str]]] = {}
    current = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            current = line[1:-1].strip()
        elif current is not None and "=" in line and (only is None or current in only):
            entry_name, _, value = line.partition("=")
            found.setdefault(current, []).append(
                (entry_name.strip(), value.split("[")[0].strip()))
    return found


def _distribution(info: str) -> Distribution | None:
    """Name, version and requirements from METADATA (or an egg's PKG-INFO and requires.txt)."""
    egg = info.endswith(".egg-info")
    headers: dict[str, list[str]] = {}
    try:
        with open(os.path.join(info, "PKG-INFO" if egg else "METADATA"), encoding="utf-8") as f:
            for line in f:
                if not line.strip():
                    break  # the body (the long description) follows the headers
                if line[0] in " \t" or ":" not in line:
                    continue
                key, _, value = line.partition(":")
                headers.setdefault(key.strip().lower(), []).append(value.strip())
    except OSError:
        return None
    if "name" not in headers:
        return None
    requires = tuple(headers.get("requires-dist", ()))
    if egg:
        try:
            with open(os.path.join(info, "requires.txt"), encoding="utf-8") as f:
                lines = f.read().split("\n[")[0].splitlines()  # unconditional ones only
            requires = tuple(line.strip() for line in lines if line.strip())
        except OSError:
            requires = ()
    return Distribution(headers["name"][0], headers.get("version", ["?"])[0], requires)


def load_entry_point(
    record: PluginRecord, entry_point: EntryPoint | ReferencePlugin, *, disabled: set[str],
    only: set[str] | None,
) -> ModuleType | None:
    """Import the plugin's module, or record why not (turned off, not selected, broken)."""
    if record.names() & disabled:
        record.status, record.reason = SKIPPED, "disabled"
        record.detail = "turned off with -p no:NAME"
        return None
    if only is not None and not (record.names() & only):
        record.status, record.reason = UNLOADED, "not-selected"
        record.detail = "not named in AGENT_ENV_PLUGINS"
        return None
    # a reference plugin's requirement names the reference's releases, whose API the task-step
    # SDK here follows, not this core's own version numbers
    problem = (None if isinstance(entry_point, ReferencePlugin)
               else core_requirement_problem(entry_point.dist, core_version()))
    if problem:
        record.fail("incompatible-core", problem)
        return None
    try:
        with stdout_to_stderr():
            module: ModuleType = entry_point.load()
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt):
            raise
        record.fail("import-error", f"{type(exc).__name__}: {exc}", traceback.format_exc())
        return None
    return module


def core_requirement_problem(dist: Any, version: str) -> str | None:
    """Why the plugin's requirement on the core excludes ``version`` (None when it doesn't)."""
    if dist is None:
        return None
    for text in dist.requires or ():
        if not re.match(r"\s*agentenv[-_.]framework\s*(?![-_.\w])", text, re.IGNORECASE):
            continue
        simple = _SIMPLE_REQUIREMENT.match(text)
        if simple is not None:  # the usual ">=0.1,<0.2": no need to import packaging (~25 ms)
            specifier = simple["spec"].replace(" ", "")
            ok = _simple_contains(specifier, version)
            if ok is not None:
                if not ok:
                    return f"needs agentenv-framework{specifier}, this is {version}"
                continue
        from packaging.requirements import Requirement
        from packaging.version import InvalidVersion, Version

        requirement = Requirement(text)
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
            continue
        try:
            allowed = requirement.specifier.contains(Version(version), prereleases=True)
        except InvalidVersion:
            return None
        if not allowed:
            return f"needs agentenv-framework{requirement.specifier}, this is {version}"
    return None


#: ``agentenv-framework`` with plain numeric clauses and no extras or markers.
_SIMPLE_REQUIREMENT = re.compile(
    r"^\s*agentenv[-_.]framework\s*\(?(?P<spec>\s*(?:(?:>=|<=|==|!=|<|>)\s*\d+(?:\.\d+)*"
    r"\s*,?\s*)+)\)?\s*$",
    re.IGNORECASE,
)
_CLAUSE = re.compile(r"(>=|<=|==|!=|<|>)(\d+(?:\.\d+)*)")


def _release(text: str) -> tuple[int, ...] | None:
    """``0.1.0`` -> (0, 1); None for anything but a plain release (pre/post/dev/local)."""
    if not re.fullmatch(r"\d+(?:\.\d+)*", text):
        return None
    parts = [int(p) for p in text.split(".")]
    while len(parts) > 1 and parts[-1] == 0:
        parts.pop()
    return tuple(parts)


def _simple_contains(specifier: str, version: str) -> bool | None:
    """PEP 440 containment for plain numeric clauses; None when packaging must decide."""
    have = _release(version)
    clauses = _CLAUSE.findall(specifier)
    if have is None or not clauses or "".join(o + v for o, v in clauses) != specifier.replace(
        ",", ""
    ):
        return None
    checks = {
        ">=": lambda a, b: a >= b, "<=": lambda a, b: a <= b, ">": lambda a, b: a > b,
        "<": lambda a, b: a < b, "==": lambda a, b: a == b, "!=": lambda a, b: a != b,
    }
    for operator, text in clauses:
        wanted = _release(text)
        if wanted is None or not checks[operator](have, wanted):
            return False
    return True
