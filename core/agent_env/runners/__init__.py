"""Runners: where task runs execute, chosen by ``[runner] impl`` or ``AGENT_ENV_RUNNER``.

A runner takes task runs (a :class:`~agent_env.tasks.session.RunRequest`: the task spec and
version, its artifacts, its metadata such as ``seed`` and overrides) and returns each one's
:class:`~agent_env.tasks.engine.TaskResult` with the report of its teardown. The core registers
``local`` (in this process, asyncio); plugins add others through the ``agent_env_runners`` hook
(``ray`` from the ray_runner plugin). ``agent-env run``, ``task run`` and ``eval run`` all go
through the selected one, so one setting moves every kind of run off this machine.

The contract (:class:`Runner`) is small on purpose: ``run`` one request, ``cancel`` every run in
flight (cooperatively: the runs end ``cancelled`` and tear down what they brought up), ``close``
when done. A runner class has a ``name`` and a classmethod ``from_config(*, context, ...)`` whose
other keyword parameters are the settings of ``[runner.config]`` (checked like every table, see
:mod:`agent_env.settings`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

import attrs

from agent_env.errors import UserError

if TYPE_CHECKING:
    from agent_env.config import Config
    from agent_env.tasks.engine import TaskResult
    from agent_env.tasks.records import InstanceStore
    from agent_env.tasks.session import RunRequest
    from agent_env.tasks.teardown import Teardown, TeardownReport

#: the contribution kind runners register under (see :mod:`agent_env.plugins.registries`)
RUNNER_KIND = "runner"
DEFAULT_RUNNER = "local"
#: how many runs a session runs at once unless ``[runner] max_concurrency`` says otherwise
DEFAULT_MAX_CONCURRENCY = 4


@attrs.frozen
class RunnerContext:
    """What every runner is opened with: where records go and which sandboxes to use.

    ``teardown`` matters only to runs executed in this process (the ``local`` runner): a shared
    teardown keeps what the runs brought up until its owner tears it down (``--keep``); None
    means each run tears itself down as it ends.
    """

    instances: InstanceStore | None
    sandbox_chain: Sequence[str] | None = None
    registry: Mapping[str, type] | None = None
    teardown: Teardown | None = None


class Runner(Protocol):
    """Runs task runs somewhere; one instance serves one command (or one eval group)."""

    name: ClassVar[str]

    async def run(self, request: RunRequest) -> tuple[TaskResult, TeardownReport]:
        """Run one request to its end and tear down what it brought up."""
        ...

    def cancel(self, reason: str) -> None:
        """Cancel every run in flight and every later one (they end ``cancelled``)."""
        ...

    async def close(self) -> None:
        """Release what the runner holds (connections, actors); runs have ended by now."""
        ...


def runner_name(config: Config | None = None) -> str:
    """The runner in effect: ``[runner] impl`` (or ``AGENT_ENV_RUNNER``), else ``local``."""
    section = _section(config)
    if "backend" in section and "impl" not in section:
        raise UserError("[runner] backend is not a setting: choose the runner with "
                        f"[runner] impl = \"NAME\" (known: {', '.join(known_runners())})")
    name = str(section.get("impl") or DEFAULT_RUNNER).strip()
    return name or DEFAULT_RUNNER


def max_concurrency(config: Config | None = None) -> int:
    """``[runner] max_concurrency``: how many runs a session runs at once (default 4)."""
    value = _section(config).get("max_concurrency", DEFAULT_MAX_CONCURRENCY)
    try:
        count = int(value)
    except (TypeError, ValueError):
        count = 0
    if count < 1:
        raise UserError(f"[runner] max_concurrency must be a whole number >= 1, not {value!r}")
    return count


def known_runners() -> list[str]:
    from agent_env.runtime import current

    return sorted(current().host.registry(RUNNER_KIND))


def runner_class(name: str) -> Any:
    """The runner class ``name``; an unknown name is a one-line error naming the known ones."""
    from agent_env.plugins.catalog import provider_of
    from agent_env.runtime import current

    host = current().host
    if name not in host.registry(RUNNER_KIND):
        known = ", ".join(known_runners())
        plugin = provider_of(RUNNER_KIND, name)
        hint = (f"; it comes from the {plugin.short_name} plugin: {plugin.install_hint()}"
                if plugin else "")
        raise UserError(f"unknown runner '{name}' in [runner] impl / AGENT_ENV_RUNNER "
                        f"(known: {known}){hint}")
    return host.lookup(RUNNER_KIND, name)


def open_runner(context: RunnerContext, *, name: str | None = None,
                config: Config | None = None) -> Runner:
    """Build the selected runner from ``[runner.config]`` for ``context``."""
    from agent_env.settings import build

    name = name or runner_name(config)
    cls = runner_class(name)
    settings = _section(config).get("config", {})
    if not isinstance(settings, dict):
        raise UserError("[runner.config] must be a table")
    runner: Runner = build(cls.from_config, settings, where="[runner.config]",
                           what=f"the '{name}' runner", injected={"context": context})
    return runner


def _section(config: Config | None) -> dict[str, Any]:
    if config is None:
        from agent_env.runtime import current

        config = current().config
    return config.section("runner")
