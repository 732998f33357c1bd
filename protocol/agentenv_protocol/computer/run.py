"""Serve a driver class from its file: ``python -m agentenv_protocol.computer.run FOLDER
FILE CLASS`` (what a ``computer_driver`` env's desktop runs), on ``MCP_HOST``:``MCP_PORT``."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from .driver import ComputerDriverEnvironment


def load_driver(folder: Path, file: str, name: str) -> type[ComputerDriverEnvironment]:
    """The class ``name`` of ``folder/file`` (its folder importable, as a script's is)."""
    sys.path.insert(0, str(folder))
    spec = importlib.util.spec_from_file_location("computer_driver_module", folder / file)
    if spec is None or spec.loader is None:
        raise SystemExit(f"driver: cannot import {folder / file}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    cls = getattr(module, name, None)
    if not (isinstance(cls, type) and issubclass(cls, ComputerDriverEnvironment)):
        raise SystemExit(f"driver: {file} has no ComputerDriverEnvironment subclass {name}")
    return cls


def serve_driver(folder: Path, file: str, name: str) -> None:
    load_driver(folder, file, name)().serve()


if __name__ == "__main__":
    if len(sys.argv) != 4:
        raise SystemExit("usage: python -m agentenv_protocol.computer.run FOLDER FILE CLASS")
    serve_driver(Path(sys.argv[1]), sys.argv[2], sys.argv[3])
