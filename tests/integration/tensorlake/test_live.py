"""Live smoke test: a real Tensorlake sandbox, echo deployed in it, one tool call through it.

Runs only with ``TENSORLAKE_API_KEY`` in the environment (a live account; the cloud is not
reachable from CI), and skips otherwise with that reason. ``TENSORLAKE_API_URL`` and
``AGENTENV_TENSORLAKE_IMAGE`` override the endpoint and the Docker-capable image.
"""

from __future__ import annotations

import os

import pytest

pytestmark = pytest.mark.slow
LIVE_KEY = os.environ.get("TENSORLAKE_API_KEY")


@pytest.mark.skipif(not LIVE_KEY, reason="capability: a live Tensorlake account "
                    "(set TENSORLAKE_API_KEY to run the live smoke test)")
def test_live_tensorlake_deploys_echo_and_answers_a_tool_call(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from agent_env import runtime
    from agent_env.cli.run_cmd import run_bundle

    settings = {"api_key": LIVE_KEY}
    if os.environ.get("TENSORLAKE_API_URL"):
        settings["api_url"] = os.environ["TENSORLAKE_API_URL"]
    if os.environ.get("AGENTENV_TENSORLAKE_IMAGE"):
        settings["image"] = os.environ["AGENTENV_TENSORLAKE_IMAGE"]
    runtime.configure(sandbox={"providers": {"tensorlake": {"config": settings}}})
    code = run_bundle("echo-mcp", sandbox="tensorlake")
    out = capsys.readouterr()
    assert code == 0, out.out + out.err
