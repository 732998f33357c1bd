"""Live smoke test: a real boxd machine, echo deployed in it, one tool call through it.

Runs only with ``BOXD_API_KEY`` in the environment (a live account; the cloud is not reachable
from CI), and skips otherwise with that reason. ``BOXD_ORG`` and ``AGENTENV_BOXD_SNAPSHOT``
pick the organization and a snapshot to boot.
"""

from __future__ import annotations

import os

import pytest

pytestmark = pytest.mark.slow
LIVE_KEY = os.environ.get("BOXD_API_KEY")


@pytest.mark.skipif(not LIVE_KEY, reason="capability: a live boxd account "
                    "(set BOXD_API_KEY to run the live smoke test)")
def test_live_boxd_deploys_echo_and_answers_a_tool_call(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from agent_env import runtime
    from agent_env.cli.run_cmd import run_bundle

    settings = {"api_key": LIVE_KEY}
    for variable, key in (("BOXD_ORG", "org"), ("AGENTENV_BOXD_SNAPSHOT", "snapshot")):
        if os.environ.get(variable):
            settings[key] = os.environ[variable]
    runtime.configure(sandbox={"providers": {"boxd": {"config": settings}}})
    code = run_bundle("echo-mcp", sandbox="boxd")
    out = capsys.readouterr()
    assert code == 0, out.out + out.err
