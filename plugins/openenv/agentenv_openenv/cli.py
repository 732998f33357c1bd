"""``agent-env openenv serve``: a bundle's tasks as an OpenEnv server.

Only click is imported at module top; openenv, FastAPI and uvicorn load when the command runs.
"""

from __future__ import annotations

import click


@click.group("openenv")
def openenv() -> None:
    """Serve tasks to OpenEnv clients (TRL and other trainers)."""


@openenv.command("serve")
@click.argument("bundle")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to bind. Anything but loopback lets others play your envs.")
@click.option("--port", type=click.IntRange(0, 65535), default=8000, show_default=True)
@click.option("--sandbox", help="Where envs deploy (a provider, or a chain a,b), as for run.")
@click.option("--max-sessions", "max_sessions", type=click.IntRange(1), default=8,
              show_default=True, help="Sessions at once; each holds one episode's envs.")
@click.option("--reward", help="The step id whose score is the reward (default: the mean of "
                               "the task's scores).")
@click.option("--turn-timeout", type=click.FloatRange(min=1), help="Each turn's deadline in "
              "seconds (default: the prompt's timeout_seconds).")
def serve(bundle: str, host: str, port: int, sandbox: str | None, max_sessions: int,
          reward: str | None, turn_timeout: float | None) -> None:
    """Serve every task of BUNDLE (a folder or an installed bundle's name) as an OpenEnv env.

    A reset starts an episode (an env from the pool, else a fresh deploy); each step is one
    tool call, or end_turn with the agent's reply; the last end_turn answers the scores and
    the reward. Ctrl-C abandons open episodes and tears every env down.
    """
    import uvicorn

    from agent_env.api import echo
    from agentenv_openenv.app import build_app

    app = build_app(bundle, reward=reward, sandbox=sandbox, max_concurrent_envs=max_sessions,
                    turn_timeout=turn_timeout)
    served = app.state.agentenv
    for split, tasks in served.describe().items():
        echo(f"{split}: {', '.join(t['name'] for t in tasks) or '(none)'}")
    echo(f"OpenEnv server on http://{host}:{port} (WebSocket /ws, tasks at /agentenv/tasks)")
    uvicorn.run(app, host=host, port=port, log_level="warning")
