"""An env file written for the reference (pydantic ``Field`` descriptions, ``.serve()``) runs
unchanged on our SDK, as a process bound through MCP_HOST/MCP_PORT."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

import aiohttp
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from agentenv_protocol import DataPlaneClient, McpClient, TextPart, fetch_card
from agentenv_protocol.testing import free_port

ENV_FILE = Path(__file__).with_name("reference_style_env.py")


async def test_reference_style_env_runs_unchanged() -> None:
    port = free_port()
    started = time.monotonic()
    proc = subprocess.Popen([sys.executable, str(ENV_FILE)],
                            env={**os.environ, "MCP_HOST": "127.0.0.1", "MCP_PORT": str(port)},
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    base = f"http://127.0.0.1:{port}"
    try:
        ready_after = None
        async with aiohttp.ClientSession() as http:
            while time.monotonic() - started < 20:
                try:
                    async with http.get(base + "/ready") as r:
                        if r.status == 200:
                            ready_after = time.monotonic() - started
                            break
                except aiohttp.ClientError:
                    await asyncio.sleep(0.01)
        assert ready_after is not None, proc.stderr.read() if proc.stderr else ""

        card = await fetch_card(base)
        assert card.name == "echo"
        assert card.tool_names == ["echo", "echo_count", "fail_politely"]
        assert card.operations == ("data/reset", "data/add", "data/get")
        echo = card.capabilities.tools[0]  # type: ignore[index]
        assert echo.input_schema["properties"]["text"]["description"] == "The text to send back."

        async with streamable_http_client(base + card.mcp_path) as (r, w), \
                ClientSession(r, w) as session:
            await session.initialize()
            assert (await session.call_tool("echo", {"text": "unchanged"})).content[0].text \
                == "unchanged"

        async with DataPlaneClient(base) as data:
            await data.add([TextPart("note")])
            assert await data.get() == [TextPart("note")]
        async with McpClient(base + "/mcp") as client:
            assert (await client.call_tool("echo_count")).text == "1"
    finally:
        proc.terminate()
        proc.wait(10)


def test_environment_name_comes_from_env_var() -> None:
    code = (f"import sys; sys.path.insert(0, {str(ENV_FILE.parent)!r}); "
            "from reference_style_env import EchoEnv; "
            "e = EchoEnv(); print(e.environment_name, sorted(e.agentenv_registry().tools))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "ENVIRONMENT_NAME": "renamed"}, check=True).stdout
    assert out.split() == ["renamed", "['echo',", "'fail_politely',", "'renamed_count']"]


def test_import_is_cheap_and_ours() -> None:
    code = ("import sys, time; t = time.perf_counter(); import agentenv_protocol as p; "
            "dt = time.perf_counter() - t; "
            "from agentenv_protocol import tool, AgentEnvEnvironment; "
            "print(p.__file__, 'aiohttp' in sys.modules, 'pydantic' in sys.modules, dt)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    repo = Path(__file__).resolve().parents[3]
    assert Path(out[0]).resolve().is_relative_to(repo / "protocol")
    assert out[1:3] == ["False", "False"]  # declaring an env loads neither aiohttp nor pydantic
    assert float(out[3]) < 0.05
