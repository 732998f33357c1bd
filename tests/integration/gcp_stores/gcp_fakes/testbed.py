"""What the test modules share: the project and bucket names, and handles on the fakes.

(Kept here rather than in ``conftest.py``: with pytest's importlib mode a ``from conftest
import`` could pick up another folder's conftest module.)
"""

from __future__ import annotations

import json
import os
import subprocess
from typing import Any

PROJECT = "agentenv-test"
BUCKET = "agentenv-test-bucket"


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


class FirestoreServer:
    """The fake Firestore running in its own process, and its control line (see the fake)."""

    def __init__(self, process: subprocess.Popen[str], host: str) -> None:
        self.process = process
        self.host = host

    def control(self, **command: Any) -> dict[str, Any]:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(json.dumps(command) + "\n")
        self.process.stdin.flush()
        return json.loads(self.process.stdout.readline())
