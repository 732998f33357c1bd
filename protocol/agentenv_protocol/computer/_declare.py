"""Read a driver class where its own dependencies are not installed, as a ``computer_driver``
env's put does: ``python -m agentenv_protocol.computer._declare FOLDER FILE CLASS`` imports
``FOLDER/FILE`` with every module not installed here standing in as an inert stub, and prints
what the class declares for each platform it supports, as JSON. Only the module's definitions
run; a class that cannot be defined even so exits 1 with why (the last stderr line)."""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import sys
import types
from pathlib import Path
from typing import Any

from .driver import COMPUTER, ComputerDriverEnvironment
from .platform import supported


class _StubType(type):
    def __getattr__(cls, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return cls

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        return cls

    def __getitem__(cls, key: Any) -> Any:
        return cls


class _Stub(metaclass=_StubType):
    """Whatever a stubbed module holds: itself again on any attribute, call or index."""


class _StubModule(types.ModuleType):
    __path__: list[str] = []

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _Stub


class _Stubs(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Last on ``sys.meta_path``: a module no real finder finds imports as a stub."""

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

    def create_module(self, spec: Any) -> types.ModuleType:
        return _StubModule(spec.name)

    def exec_module(self, module: types.ModuleType) -> None:
        return None


def declare(folder: Path, file: str, name: str) -> dict[str, Any]:
    """The card name, ``supports`` and, per platform, the extensions, tools and computer/v1
    features of class ``name`` in ``folder/file``; ValueError for a class that is no driver
    or names no platform."""
    sys.path.insert(0, str(folder))
    sys.meta_path.append(_Stubs())
    spec = importlib.util.spec_from_file_location("computer_driver_module", folder / file)
    if spec is None or spec.loader is None:
        raise ValueError(f"{file} cannot be imported")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    cls = getattr(module, name, None)
    if not (isinstance(cls, type) and issubclass(cls, ComputerDriverEnvironment)):
        raise ValueError(f"{file} has no ComputerDriverEnvironment subclass named {name}")
    platforms = [platform for entry in cls.supports for platform in supported(entry)]
    if not platforms:
        raise ValueError(f"{name} declares no platform: name them with "
                         "@computer_driver(supports=[...])")
    cards = [(platform, cls.declaration(platform)) for platform in platforms]
    out = []
    for platform, card in cards:
        capabilities = card["capabilities"]
        extensions = capabilities.get("extensions") or []
        out.append({"platform": platform.as_dict(),
                    "provides": [e["uri"] for e in extensions],
                    "tools": [t["name"] for t in capabilities.get("tools") or []],
                    "features": next(e["params"] for e in extensions if e["uri"] == COMPUTER)})
    return {"name": cards[0][1]["name"], "supports": list(cls.supports), "platforms": out}


def main(argv: list[str]) -> int:
    """The declaration is the only output; what the module prints while loading goes to
    stderr."""
    if len(argv) != 3:
        print("usage: python -m agentenv_protocol.computer._declare FOLDER FILE CLASS",
              file=sys.stderr)
        return 2
    folder, file, name = argv
    try:
        with contextlib.redirect_stdout(sys.stderr):
            declared = declare(Path(folder), file, name)
    except Exception as exc:
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(declared))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
