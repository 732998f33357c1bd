"""The unit tier stays fast and self-contained: no test in it starts a process or opens a socket
(those belong in ``tests/integration`` or ``tests/e2e``). Read from the sources, so a new test
that breaks the rule fails here, naming its file."""

from __future__ import annotations

import ast
from pathlib import Path

UNIT = Path(__file__).resolve().parent
#: Modules whose import means a process or a socket (the protocol SDK's test server included).
FORBIDDEN = {"subprocess", "socket", "multiprocessing", "agentenv_protocol.testing"}


def _imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
    return found


def test_no_unit_test_starts_a_process_or_opens_a_socket() -> None:
    offenders = sorted(
        f"{path.relative_to(UNIT)}: imports {', '.join(sorted(hit))}"
        for path in UNIT.rglob("*.py")
        if (hit := {name for name in _imports(path)
                    if any(name == f or name.startswith(f + ".") for f in FORBIDDEN)})
    )
    assert offenders == [], "move these to tests/integration or tests/e2e: " + "; ".join(
        offenders)
