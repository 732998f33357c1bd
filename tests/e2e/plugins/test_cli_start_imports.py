"""Starting the CLI stays cheap: discovery never imports importlib.metadata (a fresh process)."""

from __future__ import annotations

import subprocess
import sys


def test_starting_the_cli_does_not_import_importlib_metadata() -> None:
    code = ("import sys; from agent_env.cli.main import main\n"
            "try:\n    main(['plugin', 'list', '--json'])\nexcept SystemExit:\n    pass\n"
            "print('importlib.metadata' in sys.modules, file=sys.stderr)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)
    assert done.stderr.strip().splitlines()[-1] == "False", done.stderr
