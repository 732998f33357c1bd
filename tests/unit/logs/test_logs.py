"""Logging: readable lines or JSON lines on the current stderr; our loggers only."""

from __future__ import annotations

import json
import logging

from agent_env.logs import configure_logging, get_logger


def test_json_lines_go_to_the_current_stderr(capsys) -> None:
    configure_logging(json_lines=True)
    get_logger("t").info("deployed", env="echo")
    line = capsys.readouterr().err.strip().splitlines()[-1]
    record = json.loads(line)
    assert record["event"] == "deployed" and record["env"] == "echo"
    assert record["level"] == "info" and record["logger"] == "t"
    configure_logging()


def test_debug_only_with_verbose(capsys) -> None:
    configure_logging(verbose=False, json_lines=False)
    get_logger("t").debug("hidden detail")
    assert "hidden detail" not in capsys.readouterr().err
    configure_logging(verbose=True, json_lines=False)
    get_logger("t").debug("shown detail")
    assert "shown detail" in capsys.readouterr().err
    configure_logging()


def test_third_party_loggers_stay_at_warning() -> None:
    configure_logging(verbose=True)
    assert logging.getLogger().getEffectiveLevel() >= logging.WARNING
    configure_logging()
