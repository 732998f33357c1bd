"""Issue 21, class 18: control and format characters in ids reach no terminal raw."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cli_runner import cli

from agent_env.cli.console import printable

RAW = ("\u202e", "\x00", "\x1b", "\x85", "\u200b", "\u2028", "\x7f")


def test_printable_escapes_what_changes_how_a_line_reads() -> None:
    assert printable("a\u202eb\x00c\x1b[2Jd\x85\u200b\u2028\x7f") == (
        "a\\u202eb\\x00c\\x1b[2Jd\\x85\\u200b\\u2028\\x7f")
    assert printable("naïve 日本 ✓\tok\nnext") == "naïve 日本 ✓\tok\nnext"  # kept as is



def test_a_step_id_with_control_characters_is_shown_escaped(state_root: Path, tmp_path: Path,
                                                            capsys: Any) -> None:
    bundle = tmp_path / "b"
    (bundle / "tasks").mkdir(parents=True)
    step = "box\u202eevil\x1b[2J"
    (bundle / "tasks" / "t.json").write_text(json.dumps([
        {"id": step, "type": "deploy_sandbox", "sandbox_type": "local"},
        {"id": "check", "type": "verify_sandbox", "sandbox_name": "nope", "criteria": [
            {"type": "bash_cmd_succeeds", "bash_cmd": "true"}]}]))
    code, out, err = cli(capsys, "run", str(bundle))
    assert code == 1  # the check step names a sandbox that is not up: a failure line too
    shown = out + err
    assert "box\\u202eevil\\x1b[2J" in shown, shown
    assert not any(char in shown for char in RAW), repr(shown)
