"""Verify scripts written for the official mcp 1.x client run unchanged on the installed mcp.

No Docker: the env and the gateway run in this process (the protocol package's test servers).
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from agentenv_mcp_env import mcp_compat
from agentenv_mcp_env.steps import _load_entry
from agentenv_protocol import AgentEnvEnvironment, environment_card, tool
from agentenv_protocol.testing import RunningServer, serve_env, serve_gateway


@pytest.fixture(scope="session")
def docker_client() -> Any:
    """This module needs no Docker (overrides the directory's fixture)."""
    return None


@environment_card(name="echo")
class EchoEnv(AgentEnvEnvironment):
    @tool(name="echo")
    def echo(self, text: str) -> str:
        """Return the text."""
        return text


@pytest.fixture
async def gateway() -> AsyncIterator[RunningServer]:
    async with serve_env(EchoEnv()) as env, serve_gateway([env.url]) as gw:
        yield gw


# The reference's echo-mcp verify.py, as its 0.9.x wheel ships it (mcp 1.24+ API).
REFERENCE_STYLE = '''
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

SENT = "hello from agent-env"


async def verify(mcp_url):
    async with streamable_http_client(mcp_url) as (read, write, _):
        async with ClientSession(read, write) as session:
            await session.initialize()
            result = await session.call_tool("echo", {"text": SENT})
    text = "".join(getattr(part, "text", "") for part in result.content)
    return [{"id": "echoes", "result": not result.isError and text == SENT,
             "description": f"echo returned {text!r}"}]
'''

# mcp 1.x's older name and keyword arguments, get_session_id, camelCase attributes.
OLD_NAME = '''
from mcp import ClientSession
from mcp.client.streamable_http import streamablehttp_client


async def verify(mcp_url):
    async with streamablehttp_client(mcp_url, headers={"X-Trace": "1"}, timeout=10,
                                     sse_read_timeout=30) as (read, write, get_session_id):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            tools = await session.list_tools()
            result = await session.call_tool("nope", {})
            session_id = get_session_id()
    return [{"id": "old", "result": bool(session_id) and result.isError
             and tools.tools[0].inputSchema["type"] == "object"
             and bool(init.protocolVersion) and init.serverInfo.name == "gateway",
             "description": f"session {session_id}"}]
'''

# mcp 2.x style: two streams, snake_case attributes.
NEW_STYLE = '''
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client


async def verify(mcp_url):
    async with streamable_http_client(mcp_url) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            result = await session.call_tool("echo", {"text": "two"})
    return [{"id": "new", "result": not result.is_error and result.content[0].text == "two",
             "description": "2.x style"}]
'''


@pytest.mark.parametrize("source", [REFERENCE_STYLE, OLD_NAME, NEW_STYLE],
                         ids=["reference-1.x", "old-name-1.x", "2.x"])
async def test_scripts_of_either_mcp_generation_run_unchanged(
    gateway: RunningServer, tmp_path: Path, source: str
) -> None:
    if source is NEW_STYLE and not mcp_compat.needs_compat():
        pytest.skip("mcp 1.x is installed: a script written for 2.x cannot run on it")
    script = tmp_path / "verify.py"
    script.write_text(source)
    rows = await _load_entry(script, "verify", "check")(gateway.mcp_url)
    assert rows[0]["result"] is True, rows


def test_the_compatibility_view_stays_inside_the_script(tmp_path: Path) -> None:
    import mcp.client.streamable_http as real

    script = tmp_path / "verify.py"
    script.write_text(REFERENCE_STYLE)
    _load_entry(script, "verify", "check")
    assert sys.modules["mcp.client.streamable_http"] is real
    if mcp_compat.needs_compat():
        assert not hasattr(real, "streamablehttp_client")  # mcp 2.x itself is untouched


def test_camel_case_attributes_are_a_fallback_only() -> None:
    if not mcp_compat.needs_compat():
        pytest.skip("mcp 1.x is installed: nothing to adapt")
    from mcp.types import CallToolResult, TextContent

    mcp_compat.install_attribute_aliases()
    result = CallToolResult(content=[TextContent(type="text", text="x")], is_error=True,
                            structured_content={"a": 1})
    assert result.isError is True and result.is_error is True
    assert result.structuredContent == {"a": 1}
    with pytest.raises(AttributeError):
        _ = result.noSuchThing


def test_which_scripts_get_the_view() -> None:
    assert mcp_compat.unpacks_two(NEW_STYLE)
    assert not mcp_compat.unpacks_two(REFERENCE_STYLE)
    assert not mcp_compat.unpacks_two(OLD_NAME)
    expected = mcp_compat.needs_compat()
    assert (mcp_compat.script_builtins(REFERENCE_STYLE) is not None) is expected
    assert mcp_compat.script_builtins(NEW_STYLE) is None
    assert mcp_compat.script_builtins("import json\n") is None


@pytest.mark.parametrize(("files", "loaded"), [
    ({"verify.py": "async def verify(url):\n    return []\n"}, False),
    ({"verify.py": "import helper\nasync def verify(url):\n    return []\n",
      "helper.py": "from mcp import ClientSession\n"}, True),
], ids=["no-mcp", "mcp-in-a-helper"])
def test_a_script_without_mcp_does_not_load_it(tmp_path: Path, files: dict[str, str],
                                               loaded: bool) -> None:
    """The 1.x aliases import pydantic's mcp_types (about 0.3 s that sat between a ready env
    and its verdict): only a script whose artifact imports mcp pays for them."""
    import subprocess

    for name, text in files.items():
        (tmp_path / name).write_text(text)
    probe = ("import sys\nfrom pathlib import Path\nfrom agentenv_mcp_env.steps import "
             f"_load_entry\n_load_entry(Path({str(tmp_path / 'verify.py')!r}), 'verify', 'c')\n"
             "print('mcp_types' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == str(loaded and mcp_compat.needs_compat())
