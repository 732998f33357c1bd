"""The ``agent-env`` console script: answers ``--version`` before importing anything else,
and ends the process without tearing the interpreter down.

Why the second: after a command, Python's own finalization (clearing some 300 modules and
collecting what they held) took about 30 ms of a 245 ms ``run hello`` on the reference
machine, on every command, for nothing a user sees. :func:`console` ends the process the way
the interpreter would up to that point (threads joined, ``atexit`` handlers run, standard
streams flushed) and then leaves with :func:`os._exit`.
"""

from __future__ import annotations

import os
import sys


def main() -> None:
    """Run the CLI; raises :class:`SystemExit` with its exit code (callable in-process)."""
    if sys.argv[1:] == ["--version"]:
        from agent_env._version import VERSION

        sys.stdout.write(f"agent-env {VERSION}\n")
        raise SystemExit(0)
    from agent_env.cli.main import main as full_main

    full_main()


def console() -> None:
    """The console script (and ``python -m agent_env``): :func:`main` with generated code
    cached (:mod:`agent_env.cli.code_cache`), then a quick exit."""
    if sys.argv[1:] != ["--version"]:
        from agent_env.cli.code_cache import install

        install()
    try:
        main()
    except SystemExit as done:
        exit_now(done.code)
        raise
    exit_now(0)


def exit_now(code: object) -> None:
    """End the process with ``code`` as :class:`SystemExit` would, minus the interpreter's
    module teardown: join non-daemon threads (and the executors' exit hooks), run ``atexit``
    handlers, flush stdout and stderr, then :func:`os._exit`.

    Returns (and the caller exits normally) where that cannot be done exactly: an interpreter
    without ``threading._shutdown`` or ``atexit._run_exitfuncs``, or a standard stream that
    fails to flush (a closed pipe: Python's own exit then reports it as usual)."""
    import atexit
    import threading

    shutdown = getattr(threading, "_shutdown", None)
    run_exitfuncs = getattr(atexit, "_run_exitfuncs", None)
    if shutdown is None or run_exitfuncs is None or threading.current_thread() \
            is not threading.main_thread():
        return
    if code is None:
        status = 0
    elif isinstance(code, int):
        status = code
    else:  # SystemExit("message"): printed to stderr, status 1
        sys.stderr.write(f"{code}\n")
        status = 1
    shutdown()  # what Py_Finalize does first: executors' exit hooks, then join the threads
    run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):
            return
    os._exit(status & 0xFF)  # as the system truncates any status (exit(-1) is 255)
