"""``agent-env run echo-mcp`` through the daytona provider, end to end, on the fake API.

The env and gateway images are built by the Docker daemon "inside" the sandbox, the gateway's
port is reached on its public preview URL, the bundle's verifier makes its tool call through
it, and teardown deletes the sandbox.
"""

from __future__ import annotations

import pytest
from fake_daytona import API_KEY, FakeDaytona

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def test_echo_mcp_deploys_answers_and_is_torn_down(
    fake_daytona: FakeDaytona, capsys: pytest.CaptureFixture[str]
) -> None:
    from agent_env import runtime
    from agent_env.cli.run_cmd import run_bundle

    runtime.configure(sandbox={"providers": {"daytona": {"config": {
        "api_key": API_KEY, "api_url": f"{fake_daytona.url}/api",
    }}}})
    code = run_bundle("echo-mcp", sandbox="daytona")
    out = capsys.readouterr()
    assert code == 0, out.out + out.err
    assert "passed" in out.out
    assert fake_daytona.calls("POST", r"^/api/sandbox$")
    assert fake_daytona.calls("GET", r"/ports/\d+/preview-url$")  # the gateway's public URL
    assert fake_daytona.calls("DELETE", r"^/api/sandbox/")
    assert fake_daytona.sandboxes == {}
    assert fake_daytona.containers.leftovers() == []


def test_a_chain_hands_the_sandbox_on_when_daytona_refuses_it_and_records_who_served(
    fake_daytona: FakeDaytona, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--sandbox daytona,docker`` with Daytona out of quota: docker serves the env, the
    progress says why, and the run record names the provider of each sandbox."""
    from agent_env import runtime
    from agent_env.cli.run_cmd import run_bundle
    from agent_env.tasks.records import COLLECTION, InstanceRecord

    runtime.configure(sandbox={"providers": {"daytona": {"config": {
        "api_key": API_KEY, "api_url": f"{fake_daytona.url}/api",
    }}}})
    fake_daytona.create_faults = [(403, "Total CPU limit exceeded. Maximum allowed: 10", {})]
    code = run_bundle("echo-mcp", sandbox="daytona,docker")
    out = capsys.readouterr()
    assert code == 0, out.out + out.err
    assert "Total CPU limit exceeded" in out.out + out.err and "trying docker" in out.out + out.err
    [document] = runtime.current().document_store.query(COLLECTION, {})
    document.pop("_id")
    record = InstanceRecord.from_json(document)
    [served] = record.sandboxes
    assert served.provider == "docker" and served.name.startswith("env-")
    [passed] = served.passed_over
    assert passed.startswith("daytona: daytona could not create sandbox agentenv-vm-env-")
    assert passed.endswith("Total CPU limit exceeded. Maximum allowed: 10")
    assert fake_daytona.sandboxes == {}
