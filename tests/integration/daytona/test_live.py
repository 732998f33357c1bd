"""Live smoke test: a real Daytona sandbox, echo deployed in it, one tool call through it.

Runs only with ``DAYTONA_API_KEY`` in the environment (a live account; the cloud is not
reachable from CI), and skips otherwise with that reason. ``DAYTONA_API_URL``,
``DAYTONA_TARGET`` and ``AGENTENV_DAYTONA_SNAPSHOT`` override the endpoint, region and host.
"""

from __future__ import annotations

import os

import pytest

pytestmark = pytest.mark.slow
LIVE_KEY = os.environ.get("DAYTONA_API_KEY")


@pytest.mark.skipif(not LIVE_KEY, reason="capability: a live Daytona account "
                    "(set DAYTONA_API_KEY to run the live smoke test)")
def test_live_daytona_deploys_echo_and_answers_a_tool_call(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from agent_env import runtime
    from agent_env.cli.run_cmd import run_bundle

    settings = {"api_key": LIVE_KEY}
    for variable, key in (("DAYTONA_API_URL", "api_url"), ("DAYTONA_TARGET", "target"),
                          ("AGENTENV_DAYTONA_SNAPSHOT", "snapshot")):
        if os.environ.get(variable):
            settings[key] = os.environ[variable]
    runtime.configure(sandbox={"providers": {"daytona": {"config": settings}}})
    code = run_bundle("echo-mcp", sandbox="daytona")
    out = capsys.readouterr()
    assert code == 0, out.out + out.err
