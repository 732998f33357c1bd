"""A person in the loop, in a browser: a real run (the echo env on Docker) waits at a review
and then for a human agent's answer; in the explorer's inbox the person approves the review,
opens the ask, calls the env's echo tool (the run makes the call) and answers; the run goes on
and its verifier passes on that answer."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .test_browser import browser, shoot  # noqa: F401  (the module's Chromium fixture)

pytestmark = pytest.mark.docker

TASK = [
    {"id": "deploy", "type": "deploy_env", "env_id": "echo", "sandbox_type": "docker"},
    {"id": "human", "type": "deploy_human_agent", "depends_on": ["deploy"],
     "env_ids": ["echo"], "role": "operator"},
    {"id": "gate", "type": "review", "depends_on": ["human"], "label": "Ask the operator?",
     "timeout_seconds": 300, "poll_interval_seconds": 0.5},
    {"id": "ask", "type": "prompt_agent", "depends_on": ["gate"], "agent_name": "human_agent",
     "timeout_seconds": 300, "prompt": "Call the echo tool with 'hi from the page' and tell me "
                                       "what it returned."},
    {"id": "answer", "type": "agent_prompt_response_verifier", "depends_on": ["ask"],
     "prompt_id": "ask", "verifier_id": "answer",
     "criteria": [{"type": "response_contains", "needles": ["hi from the page"]}]},
]


@pytest.fixture
def explorer(tmp_path: Path) -> Iterator[tuple[str, dict[str, str]]]:
    env = {**os.environ, "AGENT_ENV_STATE_DIR": str(tmp_path / "state"), "NO_COLOR": "1"}
    env.pop("AGENT_ENV_CONFIG", None)
    process = subprocess.Popen([sys.executable, "-m", "agent_env", "up", "--port", "0"],
                               cwd=tmp_path, env=env, text=True, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
    assert process.stdout is not None
    found = re.search(r"Explorer: (http://127\.0\.0\.1:\d+/\?token=\S+)",
                      process.stdout.readline())
    assert found, process.stderr.read()  # type: ignore[union-attr]
    yield found.group(1), env
    process.terminate()
    process.wait(timeout=10)


def test_a_person_approves_calls_a_tool_and_answers_in_the_browser(
        browser: Any, explorer: tuple[str, dict[str, str]], tmp_path: Path,  # noqa: F811
        left_by: Any) -> None:
    from agentenv_mcp_env.plugin import BUNDLES

    url, env = explorer
    bundle = tmp_path / "operator"
    shutil.copytree(BUNDLES / "echo-mcp", bundle, ignore=shutil.ignore_patterns("__pycache__"))
    (bundle / "tasks" / "smoke.json").unlink()
    (bundle / "tasks" / "operator.json").write_text(json.dumps(TASK))
    run = subprocess.Popen([sys.executable, "-m", "agent_env", "run", str(bundle)], env=env,
                           cwd=tmp_path, text=True, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT)
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.set_default_timeout(120_000)  # the first run builds the echo env's image
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    try:
        page.goto(url)
        page.wait_for_selector("#runs")
        page.click("#nav-inbox")
        page.wait_for_selector("#reviews tr.review")
        assert "Ask the operator?" in page.inner_text("#reviews")
        page.click("#reviews tr.review button.approve")
        page.wait_for_selector("#asks tr.ask a")  # the run went on and now asks the person
        page.click("#asks tr.ask a")
        page.wait_for_selector("#ask-prompt")
        assert "hi from the page" in page.inner_text("#ask-prompt")
        page.select_option("#tool", "echo")
        page.fill("#tool-args", '{"text": "hi from the page"}')
        page.click("#call")
        page.wait_for_selector("#calls tr.call.done")
        assert "hi from the page" in page.inner_text("#calls")
        shoot(page, "inbox-ask")
        page.fill("#answer", "The echo tool returned: hi from the page")
        page.click("#send-answer")
        page.wait_for_selector("#ask-answer")
        out, _ = run.communicate(timeout=180)
    except Exception:
        if run.poll() is None:
            run.kill()
        print(run.communicate()[0])  # what the run said, beside the browser's failure
        raise
    finally:
        context.close()
    assert not errors, errors
    assert run.returncode == 0, out
    assert "tasks/operator.json v1: passed (answer: 1)" in out, out
    assert "waits for a person" in out
    assert left_by(out) == []
