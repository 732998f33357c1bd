"""The author's side: ``AgentEnvAgent`` and the ``@a2a_agent`` decorator.

The decorator checks everything it can when the class is defined (an async ``run``, a config
class every field of which has a default, known extensions), so a broken agent fails on import
rather than on its first task.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeVar

import attrs

from .models import AgentConfig, AgentIdentity, TaskRequest, TaskResult

if TYPE_CHECKING:
    from .skills import Skill

AGENT_CONFIG_V1 = "urn:agentenv:agent-config/v1"
MCP_CONFIG_V1 = "urn:agentenv:mcp-config/v1"
TRAJECTORY_V1 = "urn:agentenv:trajectory/v1"
SKILL_CONFIG_V1 = "urn:agentenv:skill-config/v1"
SNAPSHOT_V1 = "urn:agentenv:snapshot/v1"
TRIGGERS_V1 = "urn:agentenv:triggers/v1"
PEER_AGENTS_V1 = "urn:agentenv:peer-agents/v1"
INSTALL_V1 = "urn:agentenv:install/v1"
KNOWN_EXTENSIONS = (AGENT_CONFIG_V1, MCP_CONFIG_V1, TRAJECTORY_V1, SKILL_CONFIG_V1, SNAPSHOT_V1,
                    TRIGGERS_V1, PEER_AGENTS_V1, INSTALL_V1)
_SHORT = {uri.removeprefix("urn:agentenv:").split("/")[0]: uri for uri in KNOWN_EXTENSIONS}

DEFAULT_HOST = "0.0.0.0"
DEFAULT_PORT = 8000

A = TypeVar("A", bound=type)


@attrs.define(frozen=True)
class AgentSpec:
    """What ``@a2a_agent`` decided about a class; the app is built from this alone."""

    identity: AgentIdentity
    config: type[AgentConfig] | None
    extensions: tuple[str, ...]
    streaming: bool

    @property
    def config_class(self) -> type[AgentConfig]:
        return self.config or AgentConfig


class AgentEnvAgent:
    """Base class of an A2A agent: implement ``run``; optionally ``setup`` / ``teardown``.

    ``run`` is ``async def run(self, request) -> TaskResult``, or an async generator yielding
    ``str`` / ``Progress`` / ``Artifact`` updates and finally a ``TaskResult`` (a streaming
    agent, which serves ``message/stream``).
    """

    __a2a_agent__: AgentSpec
    #: The folder this agent works in, saved and loaded by snapshot/v1 (None: it keeps none).
    workspace: str | None = None

    async def run(self, request: TaskRequest[Any]) -> TaskResult:  # pragma: no cover
        raise NotImplementedError

    async def setup(self) -> None:
        """Called once when the server starts (open clients, warm caches)."""

    async def teardown(self) -> None:
        """Called once when the server stops."""

    async def save_session(self, context_id: str) -> bytes | None:
        """What the context needs beyond its trajectory to go on (a CLI's session files), for a
        snapshot to carry; None when there is nothing (the default)."""
        return None

    async def load_session(self, context_id: str, data: bytes) -> None:
        """Put back what :meth:`save_session` gave, for ``context_id`` (the context a snapshot
        is loaded into). A ValueError refuses the load, its message said; this default refuses
        every session (an agent that keeps none cannot go on from one)."""
        raise ValueError("this agent keeps no session of its own")

    async def skill_added(self, skill: Skill) -> None:
        """Called as skill-config/v1 adds a skill, before runs see it in ``request.skills``
        (install it where the agent's tools look). What it raises adds nothing and is the
        runtime's error, its message said."""

    def serve(self, host: str | None = None, port: int | None = None) -> None:
        """Serve until interrupted on ``A2A_HOST``:``A2A_PORT`` (0.0.0.0:8000) unless given."""
        from .app import serve

        serve(self, host=host, port=port)


def _resolve_extensions(items: Iterable[str]) -> tuple[str, ...]:
    out: list[str] = []
    for item in items:
        uri = _SHORT.get(item, item)
        if uri not in KNOWN_EXTENSIONS:
            raise TypeError(f"a2a_agent: unknown extension {item!r}; "
                            f"known: {', '.join(KNOWN_EXTENSIONS)}")
        if uri not in out:
            out.append(uri)
    return tuple(out)


def _check_config(config: Any) -> None:
    if not (inspect.isclass(config) and attrs.has(config) and issubclass(config, AgentConfig)):
        raise TypeError("a2a_agent: config must be an attrs class deriving from AgentConfig, "
                        f"got {config!r}")
    attrs.resolve_types(config, include_extras=False)
    missing = [f.name for f in attrs.fields(config)
               if f.default is attrs.NOTHING and f.init]
    if missing:
        raise TypeError(f"a2a_agent: config fields need defaults (a partial set must build a "
                        f"whole config): {', '.join(missing)}")
    from .wire import EXTENSION

    try:  # an annotation cattrs cannot structure should fail here, not on the first set
        EXTENSION.get_structure_hook(config)
    except Exception as exc:
        raise TypeError(f"a2a_agent: config {config.__name__} cannot be read from JSON: "
                        f"{exc}") from None


def a2a_agent(
    *,
    identity: AgentIdentity,
    config: type[AgentConfig] | None = None,
    extensions: Iterable[str] = (),
) -> Callable[[A], A]:
    """Class decorator making an ``AgentEnvAgent`` subclass servable.

    ``config`` (an ``AgentConfig`` subclass) turns on agent-config/v1; ``extensions`` lists
    further URIs (``MCP_CONFIG_V1``, ``TRAJECTORY_V1``; short names work too).
    """
    if not isinstance(identity, AgentIdentity):
        raise TypeError("a2a_agent: identity must be an AgentIdentity")
    uris = list(_resolve_extensions(extensions))
    if config is not None:
        _check_config(config)
        if AGENT_CONFIG_V1 not in uris:
            uris.insert(0, AGENT_CONFIG_V1)
    elif AGENT_CONFIG_V1 in uris:
        raise TypeError("a2a_agent: agent-config/v1 needs config=<an AgentConfig subclass>")

    def wrap(cls: A) -> A:
        if not (inspect.isclass(cls) and issubclass(cls, AgentEnvAgent)):
            raise TypeError(f"a2a_agent: {cls!r} must derive from AgentEnvAgent")
        run = inspect.getattr_static(cls, "run", None)
        if isinstance(run, (staticmethod, classmethod)):
            run = run.__func__
        if run is None or run is AgentEnvAgent.run:
            raise TypeError(f"a2a_agent: {cls.__name__} must implement run()")
        if inspect.isasyncgenfunction(run):
            streaming = True
        elif inspect.iscoroutinefunction(run):
            streaming = False
        else:
            raise TypeError(
                f"a2a_agent: {cls.__name__}.run must be 'async def' (returning a TaskResult) "
                "or an async generator (yielding updates, then a TaskResult); a plain 'def' "
                "would block the server's event loop")
        cls.__a2a_agent__ = AgentSpec(identity, config, tuple(uris), streaming)
        return cls

    return wrap


def spec_of(agent: AgentEnvAgent) -> AgentSpec:
    spec = getattr(type(agent), "__a2a_agent__", None)
    if not isinstance(spec, AgentSpec):
        raise TypeError(f"{type(agent).__name__} is not decorated with @a2a_agent")
    return spec


def bind_address(host: str | None, port: int | None) -> tuple[str, int]:
    """The explicit address, else ``A2A_HOST`` / ``A2A_PORT``, else 0.0.0.0:8000."""
    return (host or os.environ.get("A2A_HOST") or DEFAULT_HOST,
            port or int(os.environ.get("A2A_PORT") or DEFAULT_PORT))

