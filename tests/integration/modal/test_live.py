"""Live smoke test: a real Modal VM sandbox, echo deployed in it, one tool call through it.

Runs only with ``MODAL_TOKEN_ID`` and ``MODAL_TOKEN_SECRET`` in the environment (a live
account; the cloud is not reachable from CI), and skips otherwise with that reason.
``AGENTENV_MODAL_VM_IMAGE`` picks a registry image with Docker for the VM sandbox (default:
Ubuntu with Docker, built by Modal).
"""

from __future__ import annotations

import os

import pytest

pytestmark = pytest.mark.slow
LIVE = all(os.environ.get(name) for name in ("MODAL_TOKEN_ID", "MODAL_TOKEN_SECRET"))


@pytest.mark.skipif(not LIVE, reason="capability: a live Modal account (set MODAL_TOKEN_ID and "
                    "MODAL_TOKEN_SECRET to run the live smoke test)")
def test_live_modal_deploys_echo_and_answers_a_tool_call(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from agent_env import runtime
    from agent_env.cli.run_cmd import run_bundle

    settings = {}
    if os.environ.get("AGENTENV_MODAL_VM_IMAGE"):
        settings["vm_image"] = os.environ["AGENTENV_MODAL_VM_IMAGE"]
    runtime.configure(sandbox={"providers": {"modal": {"config": settings}}})
    code = run_bundle("echo-mcp", sandbox="modal")
    out = capsys.readouterr()
    assert code == 0, out.out + out.err
