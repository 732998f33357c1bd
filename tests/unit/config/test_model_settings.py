"""``[model]`` as the reference spells it: ``default``, ``roles``, ``params``, ``headers``, and
the host's ``LITELLM_EXTRA_HEADERS`` when the config sets no headers."""

from __future__ import annotations

from typing import Any

import pytest

import agent_env
from agent_env import runtime
from agent_env.errors import ConfigError
from agent_env.models import model_settings


@pytest.fixture(autouse=True)
def _fresh(state_root: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LITELLM_EXTRA_HEADERS", raising=False)


def test_default_and_roles_pick_the_model_of_each_role() -> None:
    agent_env.configure(model={"default": "base-1", "roles": {"judge": "judge-2"}})
    settings = model_settings()
    assert settings.model_for("judge") == "judge-2"
    assert settings.model_for("agent") == "base-1"
    # a simulated user is never the default model: that would simulate every conversation
    assert settings.model_for("user", or_default=False) is None


def test_name_is_the_same_setting_as_default() -> None:
    agent_env.configure(model={"name": "ours-1"})
    assert model_settings().model_for("agent") == "ours-1"


@pytest.mark.parametrize(("model", "message"), [
    ({"roles": {"critic": "x"}}, "[model] roles: critic is not a role (roles: agent, user, judge)"),
    ({"roles": "judge"}, "[model] roles must be a table, not str"),
    ({"params": {"messages": [], "temperature": 1}},
     "[model] params may not set messages: each call sets them itself"),
    ({"headers": {"X-N": 3}}, "[model] headers: X-N must be a string"),
])
def test_bad_tables_name_the_key(model: dict[str, Any], message: str) -> None:
    agent_env.configure(model=model)
    with pytest.raises(ConfigError) as caught:
        model_settings()
    assert str(caught.value) == message


def test_the_hosts_extra_headers_apply_when_the_config_sets_none(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LITELLM_EXTRA_HEADERS", '{"X-Team": "rl"}')
    assert model_settings().headers == {"X-Team": "rl"}
    agent_env.configure(model={"headers": {"X-Own": "1"}})
    assert model_settings().headers == {"X-Own": "1"}
    monkeypatch.setenv("LITELLM_EXTRA_HEADERS", "X-Team: rl")
    runtime.reset()  # a config without [model] headers
    with pytest.raises(ConfigError, match=r"\$LITELLM_EXTRA_HEADERS must be a JSON object"):
        model_settings()


def test_only_headers_that_carry_credentials_are_secrets() -> None:
    agent_env.configure(model={"headers": {"X-Team": "research", "Authorization": "Bearer t0k3n",
                                           "x-api-key": "k-123456"}})
    assert model_settings().secret_header_values() == ["Bearer t0k3n", "k-123456"]
