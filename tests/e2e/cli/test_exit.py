"""The CLI leaves without the interpreter's teardown (:func:`agent_env.cli.entry.exit_now`),
and still ends as Python would: threads finished, ``atexit`` handlers run, every line of
output written, the command's exit code kept."""

from __future__ import annotations

import json
import textwrap

LATE_WORK_PLUGIN = '''
import atexit
import os
import sys
import threading
import time

import attrs
from agent_env.hookspecs import hookimpl
from agent_env.tasks.steps import Step

OUT = os.environ["LATE_WORK_DIR"]


def _late_write():
    time.sleep(0.5)  # still running when the command returns
    with open(os.path.join(OUT, "thread.txt"), "w") as f:
        f.write("thread finished")


def _at_exit():
    with open(os.path.join(OUT, "atexit.txt"), "w") as f:
        f.write("ran")
    sys.stdout.write("said at exit")  # left in the buffer: the exit flushes it


@attrs.define(kw_only=True)
class LateWork(Step):
    type = "late_work"

    async def run(self, ctx):
        threading.Thread(target=_late_write).start()  # not a daemon: exit waits for it
        atexit.register(_at_exit)
        print("x" * 200_000)  # more than a pipe holds: flushed before the process ends


@hookimpl
def agent_env_step_types():
    return [LateWork]
'''


def _bundle(agent_env, steps: list[dict]) -> None:
    folder = agent_env.root / "b"
    (folder / "tasks").mkdir(parents=True)
    (folder / "tasks" / "t.json").write_text(json.dumps(steps))


def test_threads_atexit_and_output_all_finish_before_the_process_ends(agent_env) -> None:
    out_dir = agent_env.root / "out"
    out_dir.mkdir()
    agent_env.env["LATE_WORK_DIR"] = str(out_dir)
    agent_env.env.pop("PYTHONUNBUFFERED", None)  # buffered, as a user's stdout to a pipe is
    agent_env.add_plugin("toy_late_work", LATE_WORK_PLUGIN)
    _bundle(agent_env, [{"id": "late", "type": "late_work"}])
    done = agent_env("run", "./b")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr
    assert (out_dir / "thread.txt").read_text() == "thread finished"
    assert (out_dir / "atexit.txt").read_text() == "ran"
    assert "x" * 200_000 in done.stdout
    assert done.stdout.endswith("said at exit"), done.stdout[-300:]
    assert "t.json v1: unscored" in done.stdout  # the run's summary, after the big output


def test_a_failing_command_keeps_its_exit_code_and_message(agent_env) -> None:
    refused = agent_env("run", "./no-such-folder")
    assert refused.returncode == 1
    assert refused.stderr.startswith("Error: "), refused.stderr
    usage = agent_env("run", "--no-such-option")
    assert usage.returncode == 2
    assert "Error: No such option '--no-such-option'." in usage.stderr


def test_a_message_given_to_system_exit_is_printed_with_status_1(agent_env) -> None:
    """``SystemExit("text")`` from a plugin's command: the text on stderr, status 1, as
    Python's own exit does."""
    agent_env.add_plugin("toy_exit_text", textwrap.dedent('''
        import click
        from agent_env.hookspecs import hookimpl

        @click.command("leave")
        def leave():
            raise SystemExit("leaving with a reason")

        @hookimpl
        def agent_env_cli(cli):
            cli.add_command(leave)
    '''))
    done = agent_env("leave")
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stderr.strip() == "leaving with a reason"
