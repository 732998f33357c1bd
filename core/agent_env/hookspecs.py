# mypy: disable-error-code="empty-body"
# (hookspecs are declarations: pluggy never calls their bodies)
"""Everything a plugin can extend, in one place.

This module is the table of contents of AgentEnv's extension points. A plugin is a module (found
through the ``agent_env`` entry-point group, see :mod:`agent_env.plugins`) that implements some of
the hooks below with ``@hookimpl`` (import it, and everything else a plugin needs from the
kernel, from :mod:`agent_env.api`). The kernel's own features (local stores, the local
sandbox, the core step types, the hello bundle, the core CLI commands) are plugins too: they are
listed in :data:`agent_env.plugins.BUILTIN_PLUGINS` and register through these very hooks.

Every hook is called through pluggy, so ``tryfirst``/``trylast``, wrappers and
``AGENT_ENV_TRACE_PLUGINS=1`` work for all of them. ``agent_env_configure`` runs first, when a
runtime's plugin host is built. Contribution hooks (the first group) take no arguments and
return a list; the kernel calls them once, the first time a registry of that kind is needed,
and remembers which plugin contributed which name, so that:

* a name claimed by two plugins is left out for both and reported as a conflict;
* a plugin may not take a name the core already uses (it is skipped and reported);
* ``agent-env plugin list/show/check`` can say what each plugin provides.

Importing a plugin module must be cheap: return classes whose modules import heavy SDKs (docker,
boto3, google-cloud, ...) inside methods, not at import time.

Hooks are grouped by phase: what a plugin contributes, how it is configured, how it extends the
command line, and what it can observe while runs happen.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    import click

    from agent_env.contributions import AgentSource, BundleSource, ModelProvider, StoreBackend
    from agent_env.events import RunEvent

PROJECT = "agent_env"

hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


# --- What a plugin contributes -------------------------------------------------------------


@hookspec
def agent_env_env_types() -> list[type]:
    """Return environment type classes.

    Each class has a class attribute ``name`` (the ``type`` an ``env.toml`` names, for example
    ``"mcp_server"``) and deploys through the sandbox-provider contract, never through one
    particular provider. Called the first time the env-type registry is needed.
    """


@hookspec
def agent_env_sandbox_providers() -> list[type]:
    """Return sandbox provider classes.

    Each class has a class attribute ``name`` (``"local"``, ``"docker"``, ``"tensorlake"``, ...)
    as used by ``sandbox_type`` in steps and ``[sandbox] default`` in config, and a classmethod
    ``from_config`` whose keyword parameters are the settings of
    ``[sandbox.providers.<name>.config]`` (the kernel checks the table against them, see
    :mod:`agent_env.settings`). See :mod:`agent_env.sandbox.base` for the contract.
    """


@hookspec
def agent_env_step_types() -> list[type]:
    """Return task step classes.

    Each class has a class attribute ``type`` (the ``type`` field of a step in a task file);
    its attrs fields are the step's JSON keys and ``async run(ctx)`` performs it. See
    :mod:`agent_env.tasks.steps` for the base class. Called the first time a task is planned.
    """


@hookspec
def agent_env_stores() -> list[StoreBackend]:
    """Return store backends as :class:`agent_env.contributions.StoreBackend` records.

    A record names the store kind (``document``, ``object``, ``image`` or ``secret``), the
    backend name config uses (``[stores] object = "s3"``) and a factory called with the
    backend's settings table; its keyword parameters are the settings (checked by the kernel;
    a ``state_root`` parameter receives the config's state folder). The factory is only
    called when config selects that backend.
    """


@hookspec
def agent_env_bundles() -> list[BundleSource]:
    """Return the bundle folders this plugin ships, as :class:`BundleSource` records.

    ``agent-env run`` with no argument lists them; ``agent-env run NAME`` looks them up by name
    or alias. Only paths are returned here: nothing in the bundle is read until it runs.
    """


@hookspec
def agent_env_agent_types() -> list[type]:
    """Return agent type classes.

    Each class has a class attribute ``name`` (the ``type`` an ``agent.toml`` names, ``"a2a"``
    by default) and an ``async deploy(ctx, step, setup, source)`` that brings the agent up
    through the sandbox contract and returns the :class:`~agent_env.agents.Agent` that prompt
    steps talk to: the contract is :class:`agent_env.agents.AgentType`. Called the first time
    a task deploys an agent that no outside player stands in for.
    """


@hookspec
def agent_env_agents() -> list[AgentSource]:
    """Return the agent folders this plugin ships, as :class:`AgentSource` records.

    A folder holds an ``agent.toml`` (its ``type`` and settings) and what that type needs (a
    Dockerfile for ``a2a``). ``deploy_agent`` finds one by its ``a2a_agent_id``;
    ``agent-env a2a-agent list`` lists them. Nothing in the folder is read until it is used.
    """


@hookspec
def agent_env_model_providers() -> list[ModelProvider]:
    """Return the model providers this plugin serves, as :class:`ModelProvider` records.

    A model named ``<provider>:<rest>`` belongs to that provider (``scripted:echo``); any other
    name is forwarded to the upstream in ``[model] base_url``. Used to refuse, before a run
    starts, a model that nobody would answer (an unknown provider with no upstream configured).
    """


@hookspec
def agent_env_bundle_formats() -> list[type]:
    """Return bundle format classes: other frameworks' task folders, converted both ways.

    Each class has class attributes ``name`` (what ``agent-env bundle import NAME`` /
    ``export NAME`` select) and ``description``, and two classmethods:
    ``import_tasks(source: Path, output: Path) -> list[str]`` writes a bundle folder from the
    format's task folders and ``export_tasks(bundle: Path, output: Path) -> list[str]`` writes
    the format's folders from a bundle's tasks that fit it; each returns the lines to print and
    raises ``UserError`` (one line, nothing written) for input it cannot convert. An import
    that refuses some tasks and imports the others returns an
    :class:`~agent_env.contributions.ImportReport` instead, and one that takes a ``progress``
    keyword gets a callable for a line per task as it goes. Return a
    :class:`~agent_env.contributions.Lazy`: the converter is imported only when used.
    """


@hookspec
def agent_env_runners() -> list[type]:
    """Return runner classes: where task runs execute (``local``, ``ray``, ...).

    Each class has a class attribute ``name`` (what ``[runner] impl`` / ``AGENT_ENV_RUNNER``
    select) and a classmethod ``from_config(*, context, ...)`` whose other keyword parameters
    are the settings of ``[runner.config]``; the instance runs one request at a time per call
    (``async run(request) -> (TaskResult, TeardownReport)``), cancels cooperatively
    (``cancel(reason)``) and is closed with ``async close()``. See :mod:`agent_env.runners`.
    """


# --- How a plugin is configured ------------------------------------------------------------


@hookspec
def agent_env_configure(settings: dict[str, Any]) -> None:
    """Receive this plugin's own settings, the ``[plugins.<distribution>]`` config table.

    Called once per plugin and runtime, when the runtime's plugin host is built and before any
    contribution is used, with only that plugin's table (an empty dict when the file has none;
    the table is found by distribution or entry-point name). References such as ``env:NAME``
    are already resolved. Check the table with ``agent_env.api.build_settings(SettingsClass,
    settings, ...)`` (unknown keys become a one-line config error) and keep the result in
    ``agent_env.api.current().state``, not in a module global, so two runtimes can differ.
    """


# --- The command line ----------------------------------------------------------------------


@hookspec
def agent_env_cli(cli: click.Group) -> None:
    """Add click commands or groups to the ``agent-env`` root group.

    Called once per process, the first time the CLI looks a command up or lists them (every
    subcommand and ``--help``, not ``--version``). Add commands with ``cli.add_command``; the
    kernel resolves the claims with the same rules as every contribution: a name the core
    uses stays the core's, a name two plugins claim is left out for both (``plugin check``).
    """


# --- Observing runs ------------------------------------------------------------------------


@hookspec
def agent_env_run_event(event: RunEvent) -> None:
    """Observe a run as it happens: run started/finished, step started/finished, the
    progress lines steps send (``note``), and a group's slots started/finished (an eval's
    runs, retries included); ``event.detail`` carries the task's ``label`` and a
    step's ``position``/``total`` (see :mod:`agent_env.events`). The CLI's progress display is
    such an observer (the built-in terminal reporter).

    Called synchronously from the run's event loop for every event, in pluggy's order, so an
    observer must be quick (queue work elsewhere). An exception raised by an outside plugin is
    logged and marks that plugin failed; the run and the other observers go on.
    """
