"""``agent-env run echo-mcp`` through the tensorlake provider, end to end, on the fake API.

The env and gateway images are built by the Docker daemon "inside" the sandbox, the gateway's
port is made public through the API and reached on its ingress URL, the bundle's verifier makes
its tool call through it, and teardown deletes the sandbox.
"""

from __future__ import annotations

import pytest
from fake_tensorlake import API_KEY, FakeTensorlake

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def test_echo_mcp_deploys_answers_and_is_torn_down(
    fake_tensorlake: FakeTensorlake, capsys: pytest.CaptureFixture[str]
) -> None:
    from agent_env import runtime
    from agent_env.cli.run_cmd import run_bundle

    runtime.configure(sandbox={"providers": {"tensorlake": {"config": {
        "api_key": API_KEY, "api_url": fake_tensorlake.url,
    }}}})
    code = run_bundle("echo-mcp", sandbox="tensorlake")
    out = capsys.readouterr()
    assert code == 0, out.out + out.err
    assert "passed" in out.out
    assert fake_tensorlake.calls("POST", r"/sandboxes$")
    assert fake_tensorlake.calls("PATCH", r"/sandboxes/")  # the gateway port made public
    assert fake_tensorlake.calls("DELETE", r"/sandboxes/")
    assert fake_tensorlake.sandboxes == {}
    leftovers = fake_tensorlake.docker.containers.list(
        all=True, filters={"label": "agentenv.fake-tensorlake"})
    assert leftovers == []
