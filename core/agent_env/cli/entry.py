"""The ``agent-env`` console script: answers ``--version`` before importing anything else."""

from __future__ import annotations

import sys


def main() -> None:
    if sys.argv[1:] == ["--version"]:
        from agent_env._version import VERSION

        sys.stdout.write(f"agent-env {VERSION}\n")
        raise SystemExit(0)
    from agent_env.cli.main import main as full_main

    full_main()
