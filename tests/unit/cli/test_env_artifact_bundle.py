"""``agent-env artifact``, ``bundle init``, the deployments ledger and the bad input of
``env``: in process, on a private state root (no Docker; the Docker deploy is in
tests/e2e/env_deploy)."""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path
from typing import Any

import pytest
from cli_runner import cli

HELLO = Path(__file__).resolve().parents[3] / "core/agent_env/bundles/shipped/hello"
ECHO = (Path(__file__).resolve().parents[3]
        / "plugins/mcp_env/agentenv_mcp_env/bundles/echo-mcp/envs/echo")



# -- artifacts ------------------------------------------------------------------------------------


def test_file_put_get_round_trip_and_unchanged_is_reused(state_root: Path, tmp_path: Path,
                                                         capsys: Any) -> None:
    source = tmp_path / "src"
    (source / "sub").mkdir(parents=True)
    (source / "data.bin").write_bytes(bytes(range(256)) * 3)
    (source / "sub" / "run.sh").write_text("#!/bin/sh\necho hi\n")
    os.chmod(source / "sub" / "run.sh", 0o755)
    assert cli(capsys, "artifact", "file", "put", "--id", "data", str(source)) == (
        0, "artifact data: v1 (new)\n", "")
    assert cli(capsys, "artifact", "file", "put", "--id", "data", str(source))[1] == (
        "artifact data: v1, unchanged\n")
    out = tmp_path / "out"
    code, printed, _ = cli(capsys, "artifact", "file", "get", "--id", "data",
                           "--output-dir", str(out))
    assert code == 0 and "wrote 2 files" in printed
    assert (out / "data.bin").read_bytes() == (source / "data.bin").read_bytes()
    assert (out / "sub" / "run.sh").read_bytes() == (source / "sub" / "run.sh").read_bytes()
    assert os.stat(out / "sub" / "run.sh").st_mode & 0o111
    (source / "data.bin").write_bytes(b"changed")
    assert cli(capsys, "artifact", "file", "put", "--id", "data", str(source))[1] == (
        "artifact data: v2 (files changed: data.bin)\n")
    old = tmp_path / "old"
    cli(capsys, "artifact", "file", "get", "--id", "data", "--version", "1",
        "--output-dir", str(old))
    assert (old / "data.bin").read_bytes() == bytes(range(256)) * 3
    listed = json.loads(cli(capsys, "artifact", "file", "list", "--json")[1])
    assert [(r["id"], r["version"], r["files"]) for r in listed] == [
        ("data", 2, ["data.bin", "sub/run.sh"])]


@pytest.mark.parametrize("bad", ["../escape.txt", "/etc/evil", "a/../../x", "link/x"])
def test_get_never_writes_outside_the_output_dir(state_root: Path, tmp_path: Path,
                                                 capsys: Any, bad: str) -> None:
    from agent_env.bundles.ledger import blob_key
    from agent_env.runtime import current

    key = blob_key("0" * 64)
    current().object_store.put(key, b"payload")
    current().versioned_store.put("artifacts", "evil", {"type": "file_artifact_universe", "files": {
        "fine.txt": {"key": key, "mode": 0o644}, bad: {"key": key, "mode": 0o644}}})
    out = tmp_path / "out"
    out.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (out / "link").symlink_to(outside, target_is_directory=True)
    code, _, err = cli(capsys, "artifact", "file", "get", "--id", "evil",
                       "--output-dir", str(out))
    assert code != 0
    assert err.startswith("Error: refusing to write outside") and repr(bad) in err
    assert sorted(p.name for p in out.iterdir()) == ["link"]  # not even fine.txt
    assert list(outside.iterdir()) == []
    assert not (tmp_path / "escape.txt").exists()


def test_skill_put_get_and_bad_input(state_root: Path, tmp_path: Path, capsys: Any) -> None:
    skill = tmp_path / "skill"
    skill.mkdir()
    code, _, err = cli(capsys, "artifact", "skill", "put", "--id", "s", "--skill-dir", str(skill))
    assert code != 0 and "holds a SKILL.md" in err
    (skill / "SKILL.md").write_text("---\nname: s\n---\nDo things.\n")
    assert cli(capsys, "artifact", "skill", "put", "--id", "s", "--skill-dir", str(skill))[1] \
        == "artifact s: v1 (new)\n"
    out = tmp_path / "out"
    assert cli(capsys, "artifact", "skill", "get", "--id", "s", "--output-dir", str(out))[0] == 0
    assert (out / "SKILL.md").read_text() == (skill / "SKILL.md").read_text()
    cli(capsys, "artifact", "file", "put", "--id", "plain", str(skill / "SKILL.md"))
    code, _, err = cli(capsys, "artifact", "skill", "get", "--id", "plain",
                       "--output-dir", str(out))
    assert code != 0 and "is a file artifact, not a skill" in err
    code, _, err = cli(capsys, "artifact", "file", "get", "--id", "nope", "--output-dir",
                       str(out))
    assert code != 0 and err.startswith("Error: no artifact 'nope' is stored")


# -- bundle init ----------------------------------------------------------------------------------


def test_bundle_init_round_trip_runs_unchanged(state_root: Path, tmp_path: Path,
                                               capsys: Any) -> None:
    assert cli(capsys, "run", str(HELLO))[0] == 0
    from agent_env.runtime import current

    (task_id,) = current().versioned_store.list_ids("tasks")
    folder = tmp_path / "exported"
    code, out, _ = cli(capsys, "bundle", "init", str(folder), "--from-task", task_id)
    assert code == 0 and "1 task, 0 envs, 1 artifact" in out
    for name in ("hello.txt", "check.sh"):
        assert (folder / "artifacts/greeting" / name).read_bytes() == (
            HELLO / "artifacts/greeting" / name).read_bytes()
    steps = json.loads((folder / "tasks/hello.json").read_text())
    assert steps[1]["artifact_id"] == "greeting"  # a bundle name again, not the stored id
    code, out, _ = cli(capsys, "run", str(folder))
    assert code == 0 and "tasks/hello.json v1: passed (hello: 1)" in out
    again = cli(capsys, "bundle", "init", str(folder), "--from-task", task_id)
    assert again[0] != 0 and "exists and is not empty" in again[2]
    missing = cli(capsys, "bundle", "init", str(tmp_path / "new"), "--from-task", "nope")
    assert missing[0] != 0 and not (tmp_path / "new").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".bundle-")] == []


# -- env: bad input -------------------------------------------------------------------------------


def test_env_bad_input_is_one_line(state_root: Path, tmp_path: Path, capsys: Any) -> None:
    code, _, err = cli(capsys, "env", "deploy", "--id", "nope")
    assert code != 0 and err.startswith("Error: no env 'nope' is stored")
    code, _, err = cli(capsys, "env", "deploy", "--id", "nope", "--ttl-seconds", "0")
    assert code != 0 and "'0' is not a time to live" in err
    for huge in ("1e30", "100000000000000000000000"):  # issue 31, class 16: no overflow later
        code, _, err = cli(capsys, "env", "deploy", "--id", "nope", "--ttl-seconds", huge)
        assert code == 2 and f"'{huge}' is not a time to live" in err
    assert cli(capsys, "env", "mcp-server", "put", "--id", "echo", "--context", str(ECHO))[1] \
        == "env echo: v1 (new)\n"
    assert cli(capsys, "env", "mcp-server", "put", "--id", "echo", "--context", str(ECHO),
               "--dockerfile", str(ECHO / "Dockerfile"))[1] == "env echo: v1, unchanged\n"
    code, _, err = cli(capsys, "env", "deploy", "--id", "echo", "--version", "7")
    assert code != 0 and "has no version 7 (the latest is v1)" in err
    outside = tmp_path / "Dockerfile"
    outside.write_text("FROM scratch\n")
    code, _, err = cli(capsys, "env", "mcp-server", "put", "--id", "echo", "--context",
                       str(ECHO), "--dockerfile", str(outside))
    assert code != 0 and "is outside --context" in err
    empty = tmp_path / "empty"
    empty.mkdir()
    code, _, err = cli(capsys, "env", "mcp-server", "put", "--id", "x", "--context", str(empty))
    assert code != 0 and "has no Dockerfile" in err
    from agent_env.runtime import current

    assert current().versioned_store.list_versions("envs", "echo")[-1].version == 1
    assert current().versioned_store.latest_version("envs", "x") == 0
    code, out, _ = cli(capsys, "env", "teardown", "--id", "gone-123")
    assert code == 0 and "nothing to do" in out
    assert cli(capsys, "env", "list")[1].startswith("No envs are deployed")


# -- the deployments ledger and gc's verdicts -----------------------------------------------------


def _deployment(instance: str, expires_in: float, sandbox: str = "sb-1") -> Any:
    from agent_env.deployments import Deployment, utc_now

    now = utc_now()
    return Deployment(instance, "env", "echo", 1, "docker", sandbox,
                      {"gateway": "http://127.0.0.1:1"}, now,
                      now + dt.timedelta(seconds=expires_in))


def test_ledger_and_gc_keep_live_deployments_and_remove_expired(state_root: Path) -> None:
    from agent_env.deployments import deployments
    from agent_env.sandbox.leftovers import Found, apply_deployments, stale_records

    ledger = deployments()
    ledger.add(_deployment("live-1", 600, "sb-live"))
    ledger.add(_deployment("old-1", -5, "sb-old"))
    ledger.add(_deployment("gone-1", -5, "sb-gone"))
    assert sorted(d.instance_id for d in ledger.expired()) == ["gone-1", "old-1"]
    owner_gone = "its process 1 is gone"
    found = [Found("docker", "sb-live", "r", True, owner_gone),
             Found("docker", "sb-old", "r", False, "live run", live=True),
             Found("docker", "sb-other", "r", True, owner_gone)]
    judged = {f.sandbox_id: f for f in apply_deployments(found, ledger)}
    assert not judged["sb-live"].remove and "deployed env live-1, until" in judged["sb-live"].why
    assert judged["sb-old"].remove and "deployed env old-1 expired at" in judged["sb-old"].why
    assert judged["sb-other"] == found[2]  # not a deployment: its verdict stands
    stale = stale_records(list(judged.values()), [], ledger)
    assert [d.instance_id for d in stale] == ["gone-1"]
    assert stale_records(list(judged.values()), ["docker: no answer"], ledger) == []
    assert ledger.remove("gone-1") and not ledger.remove("gone-1")
    live = ledger.get("live-1")
    assert live is not None and live.sandbox_id == "sb-live" and not live.expired()
    assert [d.instance_id for d in ledger.list("agent")] == []


def test_bundle_init_from_an_eval_runs_its_tasks(state_root: Path, tmp_path: Path,
                                                 capsys: Any) -> None:
    from agent_env.evals.entity import EvalTask, put_eval
    from agent_env.runtime import current

    assert cli(capsys, "run", str(HELLO))[0] == 0
    (task_id,) = current().versioned_store.list_ids("tasks")
    put_eval(current().versioned_store, "greetings", [EvalTask(task_id, 1)])
    folder = tmp_path / "from-eval"
    assert cli(capsys, "bundle", "init", str(folder), "--from-eval", "greetings")[0] == 0
    assert (folder / "evals/greetings.toml").read_text() == 'tasks = ["hello"]\n'
    code, out, err = cli(capsys, "run", str(folder), "--eval", "greetings")
    assert code == 0, out + err
    assert "tasks/hello.json v1: passed (hello: 1)" in out


# -- config sources -------------------------------------------------------------------------------


def test_config_sources_lists_what_is_read_highest_first(state_root: Path, tmp_path: Path,
                                                         capsys: Any,
                                                         monkeypatch: Any) -> None:
    from agent_env import runtime

    config = tmp_path / "config.toml"
    config.write_text('[model]\nbase_url = "env:MY_UPSTREAM?http://x"\n')
    monkeypatch.setenv("AGENT_ENV_CONFIG", str(config))
    monkeypatch.setenv("AGENT_ENV_SANDBOX", "docker")
    monkeypatch.delenv("MY_UPSTREAM", raising=False)
    runtime.reset()
    rows = json.loads(cli(capsys, "config", "sources", "--json")[1])["sources"]
    names = [r["name"] for r in rows]
    assert names[0] == "configure()" and names[-1] == "built-in defaults"
    assert names.index("$AGENT_ENV_SANDBOX") < names.index(str(config)) \
        < names.index("$MY_UPSTREAM")
    used = {r["name"]: r["used"] for r in rows}
    assert used["$AGENT_ENV_SANDBOX"] and used[str(config)] and not used["$MY_UPSTREAM"]
    text = cli(capsys, "config", "sources")[1]
    assert " *  7. $AGENT_ENV_SANDBOX = docker  (sets sandbox.default)" in text
    debug = json.loads(cli(capsys, "config", "debug", "--json")[1])
    assert debug["file"] == str(config) and debug["sandbox_chain"][0] == "docker"
    runtime.reset()


def test_gc_removes_an_expired_deployment_no_listing_shows(state_root: Path) -> None:
    import asyncio

    import attrs

    from agent_env.deployments import deployments
    from agent_env.sandbox.leftovers import remove_stale, stale_records

    ledger = deployments()
    ledger.add(attrs.evolve(_deployment("gone-2", -5, "ae-no-such-sandbox"), provider="local"))
    ledger.add(attrs.evolve(_deployment("bad-2", -5, "x"), provider="no-such-provider"))
    stale = stale_records([], [], ledger)
    assert sorted(d.instance_id for d in stale) == ["bad-2", "gone-2"]
    problems = asyncio.run(remove_stale(ledger, stale))
    assert len(problems) == 1 and "bad-2" in problems[0]
    assert ledger.get("gone-2") is None  # its sandbox was gone: the record is dropped
    assert ledger.get("bad-2") is not None  # could not be judged: kept for the next gc


def test_put_bad_input_writes_nothing(state_root: Path, tmp_path: Path, capsys: Any) -> None:
    from agent_env.runtime import current

    a, b = tmp_path / "a", tmp_path / "b"
    for folder in (a, b):
        folder.mkdir()
        (folder / "same.txt").write_text(folder.name)
    code, _, err = cli(capsys, "artifact", "file", "put", "--id", "x", str(a), str(b))
    assert code != 0 and "two files would be stored as 'same.txt'" in err
    code, _, err = cli(capsys, "artifact", "file", "put", "--id", "x", str(tmp_path / "nope"))
    assert code != 0 and "no such file or folder" in err
    assert current().versioned_store.latest_version("artifacts", "x") == 0
    # an env from a prebuilt image needs no build context
    assert cli(capsys, "env", "mcp-server", "put", "--id", "prebuilt", "--image-ref",
               "registry.example/echo:1", "--environment-name", "echo")[1] \
        == "env prebuilt: v1 (new)\n"
    body = current().versioned_store.get("envs", "prebuilt").body
    assert (body["image"], body["environment_name"], body["files"]) == (
        "registry.example/echo:1", "echo", {})


def test_bundle_init_writes_the_envs_a_task_deploys(state_root: Path, tmp_path: Path,
                                                    capsys: Any) -> None:
    echo_bundle = ECHO.parents[1]
    assert cli(capsys, "env", "mcp-server", "put", "--id", "@me/echo", "--context",
               str(ECHO))[0] == 0
    assert cli(capsys, "artifact", "file", "put", "--id", "@me/check",
               str(echo_bundle / "artifacts/check_echo"))[0] == 0
    steps = json.loads((echo_bundle / "tasks/smoke.json").read_text())
    steps[0]["env_id"] = steps[1]["env_id"] = "@me/echo"
    steps[1]["file_artifact_id"] = "@me/check"
    task_file = tmp_path / "smoke.json"
    task_file.write_text(json.dumps(steps))
    assert cli(capsys, "task", "create", str(task_file), "--id", "@me/smoke")[0] == 0
    folder = tmp_path / "b"
    assert cli(capsys, "bundle", "init", str(folder), "--from-task", "@me/smoke")[0] == 0
    for name in ("Dockerfile", "server.py", "requirements.txt"):
        assert (folder / "envs/echo" / name).read_bytes() == (ECHO / name).read_bytes()
    assert (folder / "envs/echo/env.toml").read_text() == (
        'type = "mcp_server"\nenvironment_name = "echo"\n')
    written = json.loads((folder / "tasks/smoke.json").read_text())
    assert [s.get("env_id") for s in written] == ["echo", "echo"]
    assert written[1]["file_artifact_id"] == "check"
    code, out, err = cli(capsys, "run", str(folder), "--dry-run")
    assert code == 0, out + err
    assert "[tasks/smoke.json] would run 2 steps: deploy, echoes" in out


def test_env_deploy_defaults_to_the_env_type_contracts_ttl() -> None:
    """``env deploy`` writes its default TTL out (CLI start must not import the contract);
    it is the one every deploy_env uses."""
    from agent_env.cli.env_cmd import DEFAULT_TTL_SECONDS
    from agent_env.env_types import DEFAULT_TTL_SECONDS as CONTRACT_TTL

    assert DEFAULT_TTL_SECONDS == CONTRACT_TTL
