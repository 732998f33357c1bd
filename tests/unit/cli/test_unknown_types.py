"""Issue 31, class 9: an env or agent type nothing provides is refused before anything is
written or started, naming what is installed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cli_runner import cli


@pytest.mark.parametrize("declared, why", [
    ("7", "envs/e/env.toml: type must be the name of an env type (such as \"mcp_server\"), "
          "not 7"),
    ('""', "type must be the name of an env type"),
    ('"nosuch"', "envs/e: no env type named 'nosuch' (installed: computer_driver, "
                 "gateway_server, mcp_server, multi, service, service_db, website)"),
])
def test_an_unknown_env_type_fails_preflight(state_root: Path, tmp_path: Path, capsys: Any,
                                             declared: str, why: str) -> None:
    bundle = tmp_path / "b"
    (bundle / "envs" / "e").mkdir(parents=True)
    (bundle / "tasks").mkdir()
    (bundle / "envs" / "e" / "env.toml").write_text(
        f'type = {declared}\nenvironment_name = "x"\n')
    (bundle / "tasks" / "t.json").write_text(json.dumps(
        [{"id": "d", "type": "deploy_env", "env_id": "e"}]))
    code, out, err = cli(capsys, "run", str(bundle))
    assert code == 1 and why in err and "nothing was run" in err, out + err
    assert [p for p in state_root.rglob("*%o") if p.is_file()] == []  # nothing stored


def test_an_agent_of_an_unknown_type_is_not_stored(state_root: Path, tmp_path: Path,
                                                  capsys: Any) -> None:
    folder = tmp_path / "agent"
    folder.mkdir()
    (folder / "agent.toml").write_text('type = "nosuch"\nimage = "x:1"\n')
    code, _, err = cli(capsys, "a2a-agent", "put", "--id", "mine", "--folder", str(folder))
    assert code == 1 and "no agent type named 'nosuch' (installed: a2a" in err
    from agent_env.runtime import current

    assert current().versioned_store.latest_version("agents", "mine") == 0
