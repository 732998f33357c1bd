"""Issue 21, classes 10 and 11: a config file that cannot be read is one line, never a
traceback; an unreadable ``.agentenv/`` in a parent folder is skipped with a warning instead
of breaking every command."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agent_env.config import ConfigError, find_config_file, read_toml


def test_an_unreadable_agentenv_folder_above_is_skipped_with_a_warning(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    """Root reads any folder, so the refusal a non-root user gets (chmod 000) is simulated:
    ``is_file`` raises PermissionError for the blocked folder, as the OS does for them."""
    outer, blocked = tmp_path / "outer", tmp_path / "outer" / "blocked"
    (outer / ".agentenv").mkdir(parents=True)
    (outer / ".agentenv" / "config.toml").write_text("[runner]\nimpl = 'local'\n")
    (blocked / ".agentenv").mkdir(parents=True)
    work = blocked / "work"
    work.mkdir()
    real_is_file = Path.is_file

    def is_file(path: Path) -> bool:
        if path.parent == blocked / ".agentenv":
            raise PermissionError(13, "Permission denied")
        return real_is_file(path)

    monkeypatch.delenv("AGENT_ENV_CONFIG", raising=False)
    monkeypatch.setattr(Path, "is_file", is_file)
    assert find_config_file(work) == outer / ".agentenv" / "config.toml"
    err = capsys.readouterr().err
    assert err == (f"warning: skipping {blocked / '.agentenv' / 'config.toml'}: Permission "
                   "denied (fix its permissions, or set AGENT_ENV_CONFIG)\n")


def test_a_config_file_that_is_not_utf8_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_bytes(b"[stores]\nobject = \"caf\xe9\"\n")
    with pytest.raises(ConfigError) as raised:
        read_toml(path)
    assert str(raised.value) == (f"{path}:2: not UTF-8 text (byte 0xe9); save the file as "
                                 "UTF-8")
