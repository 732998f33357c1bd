"""Live smoke test: a real Tenki sandbox, echo deployed in it, one tool call through it.

Runs only with ``TENKI_API_KEY`` in the environment (a live account; the cloud is not reachable
from CI) and skips otherwise with that reason. ``TENKI_BASE_URL`` and ``TENKI_SNAPSHOT_ID``
are passed on when set.
"""

from __future__ import annotations

import os

import pytest

pytestmark = pytest.mark.slow
LIVE_KEY = os.environ.get("TENKI_API_KEY")


@pytest.mark.skipif(not LIVE_KEY, reason="capability: a live Tenki account "
                    "(set TENKI_API_KEY to run the live smoke test)")
def test_live_tenki_deploys_echo_and_answers_a_tool_call(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from agent_env import runtime
    from agent_env.cli.run_cmd import run_bundle

    settings = {"api_key": LIVE_KEY}
    for key, variable in (("base_url", "TENKI_BASE_URL"), ("snapshot_id", "TENKI_SNAPSHOT_ID")):
        if os.environ.get(variable):
            settings[key] = os.environ[variable]
    runtime.configure(sandbox={"providers": {"tenki": {"config": settings}}})
    code = run_bundle("echo-mcp", sandbox="tenki")
    out = capsys.readouterr()
    assert code == 0, out.out + out.err
