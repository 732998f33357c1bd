"""Live smoke test: a real Sailbox, echo deployed in it, one tool call through it.

Runs only with ``SAIL_API_KEY`` in the environment (a live account; the cloud is not reachable
from CI), and skips otherwise with that reason.
"""

from __future__ import annotations

import os

import pytest

pytestmark = pytest.mark.slow


@pytest.mark.skipif(not os.environ.get("SAIL_API_KEY"), reason="capability: a live Sail "
                    "account (set SAIL_API_KEY to run the live smoke test)")
def test_live_sail_deploys_echo_and_answers_a_tool_call(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from agent_env import runtime
    from agent_env.cli.run_cmd import run_bundle

    runtime.configure(sandbox={"providers": {"sail_vm": {"config": {
        "api_key": "env:SAIL_API_KEY"}}}})
    code = run_bundle("echo-mcp", sandbox="sail_vm")
    out = capsys.readouterr()
    assert code == 0, out.out + out.err
