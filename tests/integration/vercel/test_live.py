"""Live smoke test: a real Vercel sandbox, echo deployed in it, one tool call through it.

Runs only with ``VERCEL_TOKEN``, ``VERCEL_TEAM_ID`` and ``VERCEL_PROJECT_ID`` in the environment
(a live account; the cloud is not reachable from CI), and skips otherwise with that reason.
``AGENTENV_VERCEL_IMAGE`` picks the image sandboxes boot.
"""

from __future__ import annotations

import os

import pytest

pytestmark = pytest.mark.slow
LIVE = {key: os.environ.get(variable) for key, variable in (
    ("token", "VERCEL_TOKEN"), ("team_id", "VERCEL_TEAM_ID"), ("project_id", "VERCEL_PROJECT_ID"))}


@pytest.mark.skipif(not all(LIVE.values()), reason="capability: a live Vercel account (set "
                    "VERCEL_TOKEN, VERCEL_TEAM_ID and VERCEL_PROJECT_ID to run the live smoke "
                    "test)")
def test_live_vercel_deploys_echo_and_answers_a_tool_call(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from agent_env import runtime
    from agent_env.cli.run_cmd import run_bundle

    settings = dict(LIVE)
    if os.environ.get("AGENTENV_VERCEL_IMAGE"):
        settings["image"] = os.environ["AGENTENV_VERCEL_IMAGE"]
    runtime.configure(sandbox={"providers": {"vercel": {"config": settings}}})
    code = run_bundle("echo-mcp", sandbox="vercel")
    out = capsys.readouterr()
    assert code == 0, out.out + out.err
