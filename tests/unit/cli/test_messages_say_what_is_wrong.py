"""Issue 31, class 18: messages that named the wrong cause now name the right one."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cli_runner import cli


def test_a_step_type_that_is_not_a_string_is_not_called_missing(
        state_root: Path, tmp_path: Path, capsys: Any) -> None:
    bundle = tmp_path / "b"
    (bundle / "tasks").mkdir(parents=True)
    (bundle / "tasks" / "t.json").write_text(json.dumps([{"id": "a", "type": 5},
                                                         {"id": "b"}]))
    code, _, err = cli(capsys, "run", str(bundle))
    assert code == 1
    assert "step 'a': 'type' must be a step type's name (a string), not a number 5" in err
    assert "step 'b': has no 'type'" in err


def test_a_sandbox_default_that_names_nothing_is_refused(tmp_path: Path, monkeypatch) -> None:
    from agent_env import runtime
    from agent_env.errors import ConfigError

    config = tmp_path / "c.toml"
    config.write_text('[sandbox]\ndefault = ",,,"\n')
    monkeypatch.setenv("AGENT_ENV_CONFIG", str(config))
    runtime.reset()
    try:
        with pytest.raises(ConfigError, match=r"\[sandbox\] default = ',,,' names no sandbox"):
            runtime.current().config.sandbox_chain()
    finally:
        runtime.reset()


def test_a_device_is_not_called_missing(state_root: Path, capsys: Any) -> None:
    code, _, err = cli(capsys, "artifact", "file", "put", "--id", "z", "/dev/zero")
    assert code == 1 and "/dev/zero: not a regular file or folder" in err


@pytest.mark.parametrize("where", ["/proc/self", "/dev/null", "/proc/self/out", "/sys/kernel"])
def test_an_output_dir_in_a_kernel_filesystem_is_refused_first(
        state_root: Path, tmp_path: Path, capsys: Any, where: str) -> None:
    """Issue 31, class 14: these looked writable to root and ended in tracebacks."""
    one = tmp_path / "one.txt"
    one.write_text("1")
    assert cli(capsys, "artifact", "file", "put", "--id", "one", str(one))[0] == 0
    code, _, err = cli(capsys, "artifact", "file", "get", "--id", "one", "--output-dir", where)
    assert code == 2 and f"'{where}' is in /" in err and "give a folder of your own" in err


def test_a_sandbox_option_that_names_nothing_is_refused(state_root: Path, capsys: Any) -> None:
    code, _, err = cli(capsys, "run", "hello", "--sandbox", ",,,")
    assert code == 1 and "--sandbox ',,,' names no sandbox provider" in err, err
