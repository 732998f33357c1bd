"""Issue 31, classes 7 and 8: a step's ``*_version`` is the version loaded (a missing one is a
preflight problem, not a silent latest), the run record names what was loaded, and a task may
name an artifact stored under a plain id (``artifact file put --id hv``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cli_runner import cli


def _two_versions(capsys: Any, tmp_path: Path) -> None:
    source = tmp_path / "hv-src"
    source.mkdir()
    (source / "note.txt").write_text("first\n")
    assert cli(capsys, "artifact", "file", "put", "--id", "hv", str(source))[0] == 0
    (source / "note.txt").write_text("second\n")
    assert cli(capsys, "artifact", "file", "put", "--id", "hv", str(source))[1] == (
        "artifact hv: v2 (files changed: note.txt)\n")


def _bundle(tmp_path: Path, version: int | None, expected: str) -> Path:
    bundle = tmp_path / "b"
    (bundle / "tasks").mkdir(parents=True, exist_ok=True)
    load: dict[str, Any] = {"id": "load", "type": "load_artifact", "sandbox_name": "box",
                            "artifact_id": "hv", "destination_path": "/app/hv"}
    if version is not None:
        load["artifact_version"] = version
    (bundle / "tasks" / "t.json").write_text(json.dumps([
        {"id": "box", "type": "deploy_sandbox", "sandbox_name": "box", "sandbox_type": "local"},
        load,
        {"id": "check", "type": "verify_sandbox", "sandbox_name": "box", "base_dir": "/app/hv",
         "criteria": [{"type": "probe_file_contains", "paths": ["note.txt"],
                       "expected": expected}]}]))
    return bundle


def _last_run(state_root: Path) -> dict[str, Any]:
    from agent_env.stores.sqlite import SqliteDocumentStore

    documents = SqliteDocumentStore(state_root / "documents.sqlite3")
    try:
        (record,) = documents.query("task_instances", {}, sort=[("started_at_utc", -1)],
                                    limit=1)
        return dict(record)
    finally:
        documents.close()


def test_the_version_asked_for_is_the_one_loaded_and_recorded(
        state_root: Path, tmp_path: Path, capsys: Any) -> None:
    _two_versions(capsys, tmp_path)
    code, out, err = cli(capsys, "run", str(_bundle(tmp_path, 1, "first")))
    assert code == 0, out + err
    assert _last_run(state_root)["context"]["metadata"]["artifact_versions"] == {"hv": [1]}
    code, out, err = cli(capsys, "run", str(_bundle(tmp_path, None, "second")))
    assert code == 0, out + err  # unpinned: the latest
    assert _last_run(state_root)["context"]["metadata"]["artifact_versions"] == {"hv": [2]}


def test_a_version_that_does_not_exist_is_a_preflight_problem(
        state_root: Path, tmp_path: Path, capsys: Any) -> None:
    _two_versions(capsys, tmp_path)
    for version, why in ((7, "artifact_version 7: artifact 'hv' has no version 7 (the latest "
                             "is v2)"),
                         (0, "artifact_version must be a version number (1 or more), not 0")):
        code, out, err = cli(capsys, "run", str(_bundle(tmp_path, version, "first")))
        assert code == 1 and why in err and "nothing was run" in err, out + err


def test_a_stored_task_may_name_an_artifact_stored_under_a_plain_id(
        state_root: Path, tmp_path: Path, capsys: Any) -> None:
    _two_versions(capsys, tmp_path)
    steps = tmp_path / "steps.json"
    steps.write_text((_bundle(tmp_path, 2, "second") / "tasks" / "t.json").read_text())
    code, out, err = cli(capsys, "task", "create", "--id", "uses-hv", str(steps))
    assert code == 0, out + err
    code, out, err = cli(capsys, "task", "run", "--id", "uses-hv")
    assert code == 0 and "passed" in out, out + err
