"""An OpenEnv server of the example todo bundle, in this test's event loop, on a free port.

``serve(**build_app_options)`` builds the app, runs it under uvicorn (as ``agent-env openenv
serve`` does) and answers a :class:`Served` handle: the URL, the app's shared state, and the
spec ids whose containers must all be gone once the server has shut down.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import attrs
import pytest

from agent_env.episodes.episode import SPEC_LABEL

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "episodes"


@attrs.define
class Server:
    url: str
    app: Any

    @property
    def served(self) -> Any:
        return self.app.state.agentenv

    @property
    def spec(self) -> Any:
        return self.served.splits["all"][0].spec


def labelled(docker_client: Any, spec_id: str) -> list[str]:
    label = {"label": f"{SPEC_LABEL}={spec_id}"}
    return ([c.name for c in docker_client.containers.list(all=True, filters=label)]
            + [n.name for n in docker_client.networks.list(filters=label)])


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
async def serve(state_root: Any, docker_client: Any
                ) -> AsyncIterator[Callable[..., Awaitable[Server]]]:
    import uvicorn

    from agentenv_openenv import build_app

    running: list[tuple[Any, asyncio.Task[None], Server]] = []

    async def start(**options: Any) -> Server:
        app = build_app(options.pop("bundle", EXAMPLE), **{"turn_timeout": 120, **options})
        port = _free_port()
        server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port,
                                               log_level="warning", lifespan="on"))
        task = asyncio.create_task(server.serve())
        while not server.started:
            if task.done():
                task.result()
            await asyncio.sleep(0.02)
        handle = Server(f"http://127.0.0.1:{port}", app)
        running.append((server, task, handle))
        return handle

    yield start
    for server, task, handle in running:
        server.should_exit = True
        await asyncio.wait_for(task, 120)
        specs = {t.spec.id for tasks in handle.served.splits.values() for t in tasks}
        left = [name for spec_id in specs for name in labelled(docker_client, spec_id)]
        assert left == [], f"the server's shutdown left {left}"
