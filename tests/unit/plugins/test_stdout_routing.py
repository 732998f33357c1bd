"""What plugins print goes to stderr, and only what they print: hooks run in worker threads
too, and a run's own lines (its summary) must stay on stdout whatever order they end in."""

from __future__ import annotations

import threading
from typing import Any

from agent_env.plugins.discovery import stdout_to_stderr


def test_redirects_that_end_out_of_order_leave_stdout_alone(capsys: Any) -> None:
    entered = [threading.Event(), threading.Event()]
    leave = [threading.Event(), threading.Event()]

    def plugin(i: int) -> None:
        with stdout_to_stderr():
            print(f"plugin {i}")
            entered[i].set()
            leave[i].wait(5)

    threads = [threading.Thread(target=plugin, args=(i,)) for i in (0, 1)]
    threads[0].start()
    entered[0].wait(5)
    threads[1].start()
    entered[1].wait(5)
    print("the run's own line, while both plugins run")
    leave[0].set()  # the first in ends first: the order redirect_stdout could not undo
    threads[0].join(5)
    leave[1].set()
    threads[1].join(5)
    print("Tasks:")
    out, err = capsys.readouterr()
    assert out == "the run's own line, while both plugins run\nTasks:\n"
    assert sorted(err.splitlines()) == ["plugin 0", "plugin 1"]


def test_a_worker_thread_started_inside_keeps_the_choice(capsys: Any) -> None:
    """``asyncio.to_thread`` copies the context, so a hook's worker prints to stderr too."""
    import contextvars

    with stdout_to_stderr():
        context = contextvars.copy_context()
        worker = threading.Thread(target=context.run, args=(print, "from the hook's worker"))
        worker.start()
        worker.join(5)
    out, err = capsys.readouterr()
    assert (out, err) == ("", "from the hook's worker\n")
