"""Live smoke test: a real E2B sandbox, echo deployed in it, one tool call through it.

Runs only with ``E2B_API_KEY`` and ``AGENTENV_E2B_TEMPLATE`` (a template with Docker) in the
environment (a live account; the cloud is not reachable from CI), and skips otherwise with
that reason. ``E2B_DOMAIN`` overrides the domain.
"""

from __future__ import annotations

import os

import pytest

pytestmark = pytest.mark.slow
LIVE_KEY = os.environ.get("E2B_API_KEY")
LIVE_TEMPLATE = os.environ.get("AGENTENV_E2B_TEMPLATE")


@pytest.mark.skipif(not (LIVE_KEY and LIVE_TEMPLATE), reason="capability: a live E2B account "
                    "(set E2B_API_KEY and AGENTENV_E2B_TEMPLATE, a template with Docker, to run "
                    "the live smoke test)")
def test_live_e2b_deploys_echo_and_answers_a_tool_call(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from agent_env import runtime
    from agent_env.cli.run_cmd import run_bundle

    settings = {"api_key": LIVE_KEY, "base_template": LIVE_TEMPLATE}
    if os.environ.get("E2B_DOMAIN"):
        settings["domain"] = os.environ["E2B_DOMAIN"]
    runtime.configure(sandbox={"providers": {"e2b": {"config": settings}}})
    code = run_bundle("echo-mcp", sandbox="e2b")
    out = capsys.readouterr()
    assert code == 0, out.out + out.err
