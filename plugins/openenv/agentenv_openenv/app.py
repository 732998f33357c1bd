"""``build_app``: the OpenEnv server for a bundle's tasks, one episode per session at a time.

Every task the bundle holds is served in the split ``all``, and each of its evals is a split of
its own. A task is played through the episode API (:class:`agent_env.api.EpisodeSpec`) with env
reuse on: a reset takes a pooled env (reset and verified by the pool) or deploys one.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from agent_env.api import Reward, UserError, get_logger, served_tasks
from agentenv_openenv.environment import AgentEnvEnvironment, EpisodeObservation, Served

#: The split that holds every task of the bundle.
ALL = "all"
DEFAULT_MAX_SESSIONS = 8


def build_app(
    bundle: str | Path,
    *,
    reward: str | Reward | None = None,
    sandbox: str | None = None,
    max_concurrent_envs: int = DEFAULT_MAX_SESSIONS,
    turn_timeout: float | None = None,
    reuse_envs: bool = True,
) -> Any:
    """The OpenEnv app (FastAPI) serving ``bundle``'s tasks: a folder, or an installed bundle's
    name, as ``agent-env run BUNDLE`` takes it.

    ``reward`` makes a task's reward from its scores (``{step id: score}``): a step id, or a
    function; by default the mean of the scores the run recorded. ``sandbox`` is where envs
    deploy (``--sandbox``); ``max_concurrent_envs`` bounds the sessions (each holds one
    episode, so at most that many envs are lent at once); ``turn_timeout`` is each turn's
    deadline in seconds. Raises :class:`UserError` when no task can be served, naming why.
    """
    from openenv.core.env_server.http_server import create_app
    from openenv.core.env_server.mcp_types import CallToolAction

    if isinstance(max_concurrent_envs, bool) or not isinstance(max_concurrent_envs, int) \
            or max_concurrent_envs < 1:
        raise UserError(f"max_concurrent_envs must be a positive whole number, "
                        f"not {max_concurrent_envs!r}")
    found = served_tasks(bundle, reward=reward, sandbox=sandbox, turn_timeout=turn_timeout,
                         reuse_envs=reuse_envs)
    log = get_logger("openenv")
    for why in found.refused:
        log.warning("task left out", reason=why)
    if ALL in found.evals:
        raise UserError(f"{found.name}: eval 'all' has the name of the split of every task; "
                        "rename the eval")
    served = Served(found, {ALL: found.tasks, **found.evals})
    app = create_app(functools.partial(AgentEnvEnvironment, served), CallToolAction,
                     EpisodeObservation, env_name=found.name.replace(".", "-"),
                     max_concurrent_envs=max_concurrent_envs)
    app.state.agentenv = served  # what tests and embedding programs inspect
    app.add_api_route("/agentenv/tasks", served.describe, methods=["GET"],
                      summary="The served tasks by split: what reset's split and index pick")
    app.router.on_shutdown.append(served.close)
    app.add_middleware(_QuietClientGone)
    return app


class _QuietClientGone:
    """openenv-core 0.3 closes a session's WebSocket after the client already closed it and
    lets the resulting disconnect escape, which uvicorn logs as an application error with a
    traceback at the end of every session. The session was over and torn down by then."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope.get("type") != "websocket":
            await self.app(scope, receive, send)
            return
        from starlette.websockets import WebSocketDisconnect
        from uvicorn.protocols.utils import ClientDisconnected

        try:
            await self.app(scope, receive, send)
        except (WebSocketDisconnect, ClientDisconnected):
            pass
