"""The ``agent-env`` console script: answers ``--version`` before importing anything else,
and caches the code attrs and cattrs generate (:mod:`agent_env.cli.code_cache`)."""

from __future__ import annotations

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
    cached across commands."""
    if sys.argv[1:] != ["--version"]:
        from agent_env.cli.code_cache import install

        install()
    main()
