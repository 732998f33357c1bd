"""The runner hook and its selection: `[runner] impl` / `AGENT_ENV_RUNNER`, one-line errors."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from agent_env.config import load_config
from agent_env.errors import UserError
from agent_env.runners import RunnerContext, max_concurrency, open_runner, runner_name
from agent_env.runners.local import LocalRunner
from agent_env.runtime import current


def config_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(text)
    return path


def test_local_is_the_default_and_registered_through_the_hook() -> None:
    assert runner_name(load_config(environ={})) == "local"
    assert current().host.registry("runner")["local"] is LocalRunner
    runner = open_runner(RunnerContext(None), config=load_config(environ={}))
    assert isinstance(runner, LocalRunner)


def test_environment_variable_selects_impl() -> None:
    config = load_config(environ={"AGENT_ENV_RUNNER": "ray"})
    assert config.section("runner")["impl"] == "ray"
    assert runner_name(config) == "ray"


def test_unknown_runner_is_one_line_naming_the_known_ones() -> None:
    config = load_config(environ={"AGENT_ENV_RUNNER": "bogus"})
    with pytest.raises(UserError) as caught:
        open_runner(RunnerContext(None), config=config)
    message = str(caught.value)
    assert "\n" not in message
    assert "unknown runner 'bogus'" in message and "local" in message


def test_old_backend_key_is_refused_naming_impl(tmp_path: Path) -> None:
    config = load_config(config_file(tmp_path, '[runner]\nbackend = "local"\n'), environ={})
    assert any("unknown key 'backend'" in w for w in config.warnings)
    with pytest.raises(UserError, match=r'\[runner\] impl = "NAME"'):
        runner_name(config)


def test_runner_config_is_checked_against_from_config(tmp_path: Path) -> None:
    config = load_config(
        config_file(tmp_path, '[runner]\nimpl = "local"\n[runner.config]\nworkers = 3\n'),
        environ={})
    with pytest.raises(UserError, match=r"\[runner.config\] has unknown setting\(s\) workers"):
        open_runner(RunnerContext(None), config=config)


def test_max_concurrency_setting(tmp_path: Path) -> None:
    assert max_concurrency(load_config(environ={})) == 4
    set_two = load_config(config_file(tmp_path, "[runner]\nmax_concurrency = 2\n"), environ={})
    assert max_concurrency(set_two) == 2
    zero = load_config(config_file(tmp_path, "[runner]\nmax_concurrency = 0\n"), environ={})
    with pytest.raises(UserError, match="max_concurrency"):
        max_concurrency(zero)


def test_session_hands_runs_to_a_non_local_runner() -> None:
    """A session given another runner never runs the task here: the runner gets each request."""
    from agent_env.tasks.engine import TaskResult
    from agent_env.tasks.session import RunRequest, Session
    from agent_env.tasks.teardown import TeardownReport

    seen: list[str] = []

    class Recording:
        name = "recording"

        async def run(self, request: RunRequest) -> tuple[TaskResult, TeardownReport]:
            seen.append(request.spec.id)
            result = TaskResult(request.spec, f"{request.spec.id}-1", "pass", {}, [], [], 0.0)
            return result, TeardownReport()

        def cancel(self, reason: str) -> None:
            pass

        async def close(self) -> None:
            seen.append("closed")

    class Spec:
        id = "t1"
        label = "tasks/t1.json"

    session = Session(instances=None, runner=Recording(), max_parallel=2)  # type: ignore[arg-type]
    results = asyncio.run(session.run_all([RunRequest(Spec(), None)]))  # type: ignore[arg-type]
    assert [r.outcome for r in results] == ["pass"]
    assert seen == ["t1", "closed"]
