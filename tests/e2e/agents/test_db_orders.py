"""``agent-env run db-orders``: an app and its PostgreSQL database as one ``multi`` env; the
model-agent (answered by a SCRIPTED model, offline) fixes an order through the app, and the
rows, read through the database's own tool, score it. An agent that does nothing scores 0."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from agentenv_agents.plugin import BUNDLES

from .test_conversation import agent_env

pytestmark = pytest.mark.docker


def test_the_agent_fixes_the_order_and_the_rows_say_so(tmp_path: Path, left_by: Any) -> None:
    run = agent_env(tmp_path / "state", "run", "db-orders")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "tasks/fix-order.json v1: passed (rows: 1)" in run.stdout
    assert "1 tool call(s)" in run.stdout
    assert left_by(run.stdout) == []


def test_an_agent_that_does_nothing_scores_zero(tmp_path: Path, left_by: Any) -> None:
    bundle = tmp_path / "idle-orders"
    shutil.copytree(BUNDLES / "db-orders", bundle)
    script = bundle / "artifacts" / "orders_script" / "script.json"
    script.write_text(json.dumps({"name": "orders_script", "turns": [
        {"match": {"last_user_contains": "1002"}, "text": "I looked, and left it as it is."}]}))
    run = agent_env(tmp_path / "state", "run", str(bundle))
    assert run.returncode != 0
    assert "tasks/fix-order.json v1: scored below 1 (rows: 0)" in run.stdout, run.stdout
    assert left_by(run.stdout) == []
    instance = re.search(r"instance (\S+)", run.stdout.split("Tasks:")[1])
    assert instance is not None
    shown = agent_env(tmp_path / "state", "task", "get-instance", instance.group(1))
    rows = json.loads(shown.stdout)["context"]["metadata"]["verifications"]["rows"]["results"]
    assert [(r["id"], r["result"], r["justification"]) for r in rows] == [
        ("fixed", False, "order 1002 is 'pending'"),
        ("nothing_else", False, "orders now {1001: 'delivered', 1002: 'pending', "
                                "1003: 'shipped'}")]
