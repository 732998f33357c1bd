"""``--litellm-api-key`` / ``--judge-litellm-api-key``: which upstream key a role's model calls
go with, read from a value or a reference, and never kept in a record."""

from __future__ import annotations

from typing import Any

import pytest

from agent_env.errors import ConfigError
from agent_env.models import upstream_key
from agent_env.tasks.steps import RunChoices


def test_a_judge_falls_back_to_the_runs_key_and_the_others_never_take_the_judges(
        state_root: Any) -> None:
    both = RunChoices(model_api_key="sk-run", judge_api_key="sk-judge")
    assert [upstream_key(both, r) for r in ("agent", "user", "judge")] \
        == ["sk-run", "sk-run", "sk-judge"]
    only_run = RunChoices(model_api_key="sk-run")
    assert upstream_key(only_run, "judge") == "sk-run"
    only_judge = RunChoices(judge_api_key="sk-judge")
    assert upstream_key(only_judge, "agent") is None  # [model] api_key then
    assert upstream_key(RunChoices(), "judge") is None


def test_references_are_read_where_the_key_is_used(
        state_root: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEAM_KEY", "sk-from-env")
    assert upstream_key(RunChoices(model_api_key="env:TEAM_KEY"), "agent") == "sk-from-env"
    with pytest.raises(ConfigError, match=r"--judge-litellm-api-key: 'env:NOPE' is not set"):
        upstream_key(RunChoices(judge_api_key="env:NOPE"), "judge")


def test_keys_never_reach_the_record_or_repr() -> None:
    choices = RunChoices(model="m", model_api_key="sk-run", judge_api_key="sk-judge")
    assert choices.recorded() == {"model": "m"}
    assert "sk-" not in repr(choices)
