"""A run whose Modal sandbox Modal ends mid-run: an infrastructure error, not a score."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from fake_modal import BASE_IMAGE, FakeModal

pytestmark = pytest.mark.docker

TASK = [
    {"id": "box", "type": "deploy_sandbox", "sandbox_name": "box", "sandbox_mode": "vm"},
    {"id": "check", "type": "verify_sandbox", "sandbox_name": "box", "base_dir": "/tmp",
     "verifier_id": "check", "criteria": [
         {"type": "bash_cmd_succeeds", "criterion": "still up",
          "bash_cmd": "echo modal-ends-it-now"}]},
]


def test_a_sandbox_modal_ends_mid_run_is_an_infrastructure_error(
    fake_modal: FakeModal, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from agent_env import runtime
    from agent_env.cli.run_cmd import run_bundle

    (tmp_path / "tasks").mkdir()
    (tmp_path / "tasks" / "vanish.json").write_text(json.dumps(TASK))
    runtime.configure(sandbox={"providers": {"modal": {"config": {"vm_image": BASE_IMAGE}}}})
    fake_modal.vanish_on = "modal-ends-it-now"
    code = run_bundle(str(tmp_path), sandbox="modal")
    out = capsys.readouterr()
    assert code == 1, out.out + out.err
    # Modal's doing, not the agent's: an error on the step, never a score of 0
    assert re.search(r"tasks/vanish.json v1: error \(infrastructure, not scored\) at step "
                     r"'check': the sandbox was lost while running 'echo modal-ends-it-now': "
                     r"lost modal sandbox sb-\w+", out.out), out.out
    assert "scored below 1" not in out.out
    assert "Tore down 1 sandbox." in out.out
    assert fake_modal.running() == [] and fake_modal.containers.leftovers() == []
