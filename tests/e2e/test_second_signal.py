"""A second Ctrl-C stops a slow teardown and says what is still up."""

from __future__ import annotations

import json
import signal
import time

SLOW_TEARDOWN_PLUGIN = '''
import asyncio
import attrs
from agent_env.hookspecs import hookimpl
from agent_env.tasks.steps import Step


@attrs.define(kw_only=True)
class HoldSomething(Step):
    type = "hold_something"

    async def run(self, ctx):
        async def slow_close():
            await asyncio.sleep(60)
        ctx.on_teardown("thing", "a slow thing", slow_close)


@hookimpl
def agent_env_step_types():
    return [HoldSomething]
'''


def test_a_second_ctrl_c_stops_the_teardown_and_lists_what_is_up(agent_env) -> None:
    agent_env.add_plugin("toy_slow", SLOW_TEARDOWN_PLUGIN)
    folder = agent_env.root / "b"
    (folder / "tasks").mkdir(parents=True)
    (folder / "tasks" / "t.json").write_text(json.dumps([
        {"id": "hold", "type": "hold_something"},
        {"id": "box", "type": "deploy_sandbox", "sandbox_type": "local"},
        {"id": "wait", "type": "verify_sandbox",
         "criteria": [{"type": "bash_cmd_succeeds", "bash_cmd": "sleep 30"}]},
    ]))
    process = agent_env.start("run", "./b")
    sandboxes = agent_env.state / "sandboxes" / "local"
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not (sandboxes.exists() and any(sandboxes.iterdir())):
        time.sleep(0.05)
    time.sleep(0.5)
    process.send_signal(signal.SIGINT)  # cancels the run; teardown starts and hangs on the thing
    time.sleep(1.5)
    process.send_signal(signal.SIGINT)  # stops the teardown
    out, err = process.communicate(timeout=20)
    assert process.returncode == 130, out + err
    assert "Teardown stopped; still up:" in err
    assert "a slow thing" in err
