"""``cli(capsys, *args)``: ``agent-env`` run in this process, as (exit code, stdout, stderr)."""

from __future__ import annotations

from typing import Any

import pytest


def cli(capsys: Any, *args: str) -> tuple[int, str, str]:
    from agent_env.cli.main import main

    with pytest.raises(SystemExit) as exit_info:
        main(list(args))
    out, err = capsys.readouterr()
    return int(exit_info.value.code or 0), out, err
