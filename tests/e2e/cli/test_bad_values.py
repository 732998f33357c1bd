"""Issue 21, classes 9, 10 and 13: bad values on the command line and in task files are one
line naming the fix (usage errors exit 2, file problems exit 1), never a traceback, and nothing
is written before they are found."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from cli_runner import cli

from agent_env.bundles.jsonfile import MAX_DEPTH, MAX_INT_DIGITS


@pytest.mark.parametrize("args, message", [
    (("task", "get", "--id", ""), "Invalid value for '--id': an id cannot be empty"),
    (("task", "validate", "--id", " "), "Invalid value for '--id': an id cannot be empty"),
    (("eval", "get", "--id", "a\u202eb"),
     "Invalid value for '--id': an id cannot hold control characters (U+202E)"),
    (("env", "get-instance", "--id", "x\x07"), "control characters (U+0007)"),
    (("task", "get", "--id", "t", "--version", "99999999999999999999"),
     "Invalid value for '--version': '99999999999999999999' is not a version"),
    (("artifact", "file", "get", "--id", "a", "--version", "0", "--output-dir", "o"),
     "Invalid value for '--version': '0' is not a version"),
    (("eval", "get", "--id", "e", "--version", "-3"),
     "Invalid value for '--version': '-3' is not a version"),
    (("bundle", "init", "out", "--from-task", ""),
     "Invalid value for '--from-task': an id cannot be empty"),
    (("run", "hello", "--agent", "\u202e"),
     "Invalid value for '--agent' / '--a2a-agent-id': an id cannot hold control characters "
     "(U+202E)"),
    (("task", "get", "--id", "t", "--version", "\u0663"),  # an Arabic-Indic 3: not ASCII
     "Invalid value for '--version': '\u0663' is not a version"),
])
def test_bad_ids_and_versions_are_usage_errors(state_root: Path, capsys: Any,
                                               args: tuple[str, ...], message: str) -> None:
    code, _, err = cli(capsys, *args)
    assert code == 2 and message in err and "Traceback" not in err, err


def test_an_unwritable_output_dir_is_refused_before_the_run(state_root: Path, tmp_path: Path,
                                                            capsys: Any) -> None:
    a_file = tmp_path / "results.txt"
    a_file.write_text("")
    for target, message in ((a_file, "is a file, not a folder"),
                            (a_file / "sub", "cannot be made: ")):
        code, _, err = cli(capsys, "task", "run", "--id", "t", "--output-dir", str(target))
        assert code == 2 and message in err, err
    read_only = tmp_path / "ro"
    read_only.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro", "tmpfs", str(read_only)],
                             capture_output=True).returncode == 0
    try:
        if mounted:  # a read-only filesystem refuses even root
            code, _, err = cli(capsys, "eval", "run", "--id", "e", "--output-dir",
                               str(read_only / "out"))
            assert code == 2 and "is not writable here" in err, err
    finally:
        if mounted:
            subprocess.run(["umount", str(read_only)], check=True)


def _task_file(tmp_path: Path, name: str, raw: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(raw)
    return path


EDGE_VALUES = [
    (b'[{"id": "a", "type": "t", "x": ' + b"9" * 5000 + b"}]",
     f"an integer of 5000 digits is too long (at most {MAX_INT_DIGITS})"),
    (b'[{"id": "a", "type": "t", "x": 1e400}]', "1e400 is too large for a number"),
    (b'[{"id": "a", "type": "t", "x": -1E999}]', "-1E999 is too large for a number"),
    (b"[" * 200_000 + b"]" * 200_000, f"nested 200000 levels deep (at most {MAX_DEPTH})"),
    (b'[{"id": "a", "type": "t", "x": "\xff\xfe"}]', "not UTF-8 text (byte 0xff)"),
    (b'[{"id": "a", "type": "t", "x": "x\\ud800"}]',
     "a string holds \\ud800, half of a surrogate pair, which is not text"),
]


@pytest.mark.parametrize("raw, message", EDGE_VALUES)
def test_task_create_refuses_json_no_store_can_keep(state_root: Path, tmp_path: Path,
                                                    capsys: Any, raw: bytes,
                                                    message: str) -> None:
    path = _task_file(tmp_path, "t.json", raw)
    code, _, err = cli(capsys, "task", "create", str(path), "--id", "edge")
    assert code == 1 and message in err and "Traceback" not in err, err
    code, _, err = cli(capsys, "task", "get", "--id", "edge")
    assert code == 1 and "no task 'edge'" in err  # nothing stored


@pytest.mark.parametrize("raw, message", EDGE_VALUES)
def test_a_bundle_with_such_json_runs_nothing_and_stores_nothing(
        state_root: Path, tmp_path: Path, capsys: Any, raw: bytes, message: str) -> None:
    bundle = tmp_path / "b"
    (bundle / "tasks").mkdir(parents=True)
    (bundle / "artifacts" / "notes").mkdir(parents=True)
    (bundle / "artifacts" / "notes" / "a.txt").write_text("kept out of the store")
    (bundle / "tasks" / "good.json").write_text(json.dumps([
        {"id": "box", "type": "deploy_sandbox", "sandbox_name": "box", "sandbox_type": "local"},
        {"id": "load", "type": "load_artifact", "sandbox_name": "box", "artifact_id": "notes",
         "destination_path": "/app/notes"}]))
    (bundle / "tasks" / "bad.json").write_bytes(raw)
    code, out, err = cli(capsys, "run", str(bundle))
    assert code == 1 and message in err and "nothing was run" in err, out + err
    assert "Traceback" not in err
    assert stored_objects(state_root) == []  # no artifact version written before it
    (bundle / "tasks" / "bad.json").unlink()
    assert cli(capsys, "run", str(bundle))[0] == 0  # without the bad file: now it is stored
    assert stored_objects(state_root)  # the notes artifact's file


def stored_objects(state_root: Path) -> list[Path]:
    return [path for path in state_root.rglob("*%o") if path.is_file()]


def test_file_names_that_are_not_utf8_are_named_and_refused(state_root: Path, tmp_path: Path,
                                                            capsys: Any) -> None:
    bundle = tmp_path / "b"
    (bundle / "tasks").mkdir(parents=True)
    (bundle / "artifacts" / "notes").mkdir(parents=True)
    (bundle / "artifacts" / "notes" / "ok.txt").write_text("fine")
    with open(bytes(bundle / "artifacts" / "notes") + b"/caf\xe9.txt", "wb") as handle:
        handle.write(b"latin-1 name")
    with open(bytes(bundle / "tasks") + b"/t\xff.json", "wb") as handle:
        handle.write(b"[]")
    code, _, err = cli(capsys, "run", str(bundle))
    assert code == 1 and "Traceback" not in err, err
    assert "artifacts/notes: caf\\xe9.txt is not a UTF-8 file name (rename it)" in err
    assert "tasks/t\\xff.json: not a UTF-8 file name (rename it)" in err
    assert stored_objects(state_root) == []
    code, _, err = cli(capsys, "artifact", "file", "put", "--id", "notes",
                       str(bundle / "artifacts" / "notes"))
    assert code == 1 and "caf\\xe9.txt is not a UTF-8 file name" in err, err


@pytest.mark.parametrize("target, rule", [
    ("outside", "is a symlink out of its folder"),
    ("/dev/zero", "is a symlink out of its folder (to /dev/zero)"),
])
def test_bundle_files_that_lead_out_are_refused_unread(state_root: Path, tmp_path: Path,
                                                       capsys: Any, target: str,
                                                       rule: str) -> None:
    """README.md, env.toml and task files follow the bundle's symlink rule; /dev/zero used to
    be read until memory ran out."""
    secret = tmp_path / "outside"
    secret.write_text('# not yours\n[{"id": "x", "type": "deploy_sandbox"}]')
    link_to = secret if target == "outside" else Path(target)
    bundle = tmp_path / "b"
    (bundle / "tasks").mkdir(parents=True)
    (bundle / "envs" / "e").mkdir(parents=True)
    (bundle / "README.md").symlink_to(link_to)
    (bundle / "envs" / "e" / "env.toml").symlink_to(link_to)
    (bundle / "envs" / "e" / "Dockerfile").write_text("FROM python:3.11-slim\n")
    (bundle / "tasks" / "t.json").symlink_to(link_to)
    code, _, err = cli(capsys, "run", str(bundle))
    assert code == 1 and "Traceback" not in err, err
    for label in ("README.md", "tasks/t.json", "env.toml"):  # env.toml: under envs/e
        assert f"{label} {rule}" in err, err


def test_a_huge_readme_is_refused(state_root: Path, tmp_path: Path, capsys: Any) -> None:
    bundle = tmp_path / "b"
    (bundle / "tasks").mkdir(parents=True)
    (bundle / "tasks" / "t.json").write_text('[{"id": "box", "type": "deploy_sandbox", '
                                             '"sandbox_type": "local"}]')
    with open(bundle / "README.md", "wb") as handle:
        handle.truncate(64 * 1024 * 1024)
    code, _, err = cli(capsys, "run", str(bundle))
    assert code == 1 and "README.md is larger than 1024 KB" in err, err


def test_a_task_file_with_a_byte_order_mark_or_a_surrogate_pair_is_fine(
        state_root: Path, tmp_path: Path, capsys: Any) -> None:
    raw = ('\ufeff[{"id": "box", "type": "deploy_sandbox", "sandbox_type": "local", '
           '"sandbox_name": "x\\ud83d\\ude00"}]').encode("utf-8")
    path = _task_file(tmp_path, "t.json", raw)
    assert cli(capsys, "task", "create", str(path), "--id", "fine")[:2] == (
        0, "task fine: v1 (new)\n")
