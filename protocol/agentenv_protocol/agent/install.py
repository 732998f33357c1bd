"""install/v1: an agent built on this SDK exports itself, so it can run in another container.

Why: a task may want its agent inside the task's own container (the repository it fixes, the
tools it needs are there), not in an image of its own. The installer (``install_agent``) runs
the agent's image once with ``AGENTENV_INSTALL_EXPORT=<path>``: instead of serving, the agent
writes a gzipped tar there holding

* ``agentenv-install.json``: its card and how to start it (``python``, the ``major.minor`` it
  was built for; ``command``, the arguments after ``python3``; ``a2a_port``);
* ``app/``: the folder of its main script (or the working folder of a ``-m`` module);
* ``site/``: its Python packages: the distributions of the modules it has imported by then
  and of its ``requirements.txt``, with everything they require (never pip, setuptools or
  wheel).

The installer unpacks that in the target container and starts ``python3 <command>`` there with
``PYTHONPATH`` on ``site/``: the container's own Python runs it, and the container's own packages
are left alone. Compiled modules built for another Python minor version fall back to their pure
Python forms where the package has them (aiohttp, multidict, yarl and frozenlist do), so the
card asks for a Python 3.11 or later, the SDK's own floor.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any

#: The variable that turns ``serve()`` into an export.
EXPORT_ENV = "AGENTENV_INSTALL_EXPORT"
MANIFEST = "agentenv-install.json"
#: Installers' own packages: an installed agent never runs them.
_LEFT_OUT = ("pip", "setuptools", "wheel", "_distutils_hack", "pkg_resources")
MIN_PYTHON = "3.11"


def _entry_point() -> tuple[Path, list[str]]:
    """The agent's folder and the ``python3`` arguments that start it from there."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    if spec is not None and spec.name and spec.name != "__main__":  # python -m pkg.mod
        return Path.cwd(), ["-m", spec.name.removesuffix(".__main__")]
    path = getattr(main, "__file__", None)
    if not path:
        raise RuntimeError("install/v1: the agent runs from no file (an interactive session?); "
                           "start it as 'python agent.py' or 'python -m package'")
    resolved = Path(path).resolve()
    return resolved.parent, [resolved.name]


def _site_folders() -> list[Path]:
    import site
    import sysconfig

    found = [*site.getsitepackages(), sysconfig.get_paths()["purelib"],
             sysconfig.get_paths()["platlib"]]
    out: list[Path] = []
    for item in found:
        path = Path(item).resolve()
        if path.is_dir() and path not in out:
            out.append(path)
    return out


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement_names(folder: Path) -> set[str]:
    """The distributions the agent's ``requirements.txt`` names (they may load lazily)."""
    path = folder / "requirements.txt"
    if not path.is_file():
        return set()
    names = set()
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        found = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", line.split("#", 1)[0])
        if found:
            names.add(_normal(found.group(1)))
    return names


def _package_files(folder: Path) -> dict[str, Path]:
    """``site/...`` name -> file: the distributions the agent uses and what they require.

    The roots are the distributions of every module imported by now (the SDK's server is
    built, so its web stack is among them) and those its ``requirements.txt`` names; a module
    imported from outside the site folders (an editable install) goes as its package folder.
    Installers' own packages never go.
    """
    import sysconfig
    from importlib import metadata

    sites = _site_folders()
    stdlib = {Path(sysconfig.get_paths()[k]).resolve() for k in ("stdlib", "platstdlib")}
    dists: dict[str, Any] = {}
    for dist in metadata.distributions():
        name = dist.metadata["Name"]
        if name:
            dists.setdefault(_normal(name), dist)
    tops = {name.split(".", 1)[0] for name in list(sys.modules)}
    by_top = metadata.packages_distributions()
    pending = [_normal(d) for top in tops for d in by_top.get(top, ())]
    pending += sorted(_requirement_names(folder))
    chosen: set[str] = set()
    while pending:
        name = pending.pop()
        if name in chosen or name not in dists or name in _LEFT_OUT:
            continue
        chosen.add(name)
        for requirement in dists[name].requires or ():
            spec, _, marker = requirement.partition(";")
            if "extra" in marker:
                continue  # an optional part the agent did not ask for
            found = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", spec)
            if found:
                pending.append(_normal(found.group(1)))
    files: dict[str, Path] = {}
    for name in sorted(chosen):
        for item in dists[name].files or ():
            path = Path(str(dists[name].locate_file(item))).resolve()
            site = next((s for s in sites if path.is_relative_to(s)), None)
            if site is not None and path.is_file():
                files[path.relative_to(site).as_posix()] = path
    for module_name in sorted(tops):
        module = sys.modules.get(module_name)
        origin = getattr(module, "__file__", None)
        if not origin:
            continue
        path = Path(origin).resolve()
        if any(path.is_relative_to(p) for p in [*sites, *stdlib, folder]):
            continue
        root = path.parent if path.name == "__init__.py" else path
        items = sorted(root.rglob("*")) if root.is_dir() else [root]
        for item in items:
            if item.is_file():
                relative = item.relative_to(root.parent).as_posix()
                files.setdefault(relative, item)
    return {k: v for k, v in files.items() if not _skip(k)}


def card_entry(uri: str, port: int) -> dict[str, Any]:
    return {
        "uri": uri,
        "description": "Export this agent (its files and Python packages) so it can be "
                       "installed and started in a task's own container.",
        "params": {"a2a_port": port, "python": f">={MIN_PYTHON}", "export_env": EXPORT_ENV,
                   "manifest": MANIFEST},
    }


def _skip(name: str) -> bool:
    top = name.split("/", 1)[0]
    base = top.split("-", 1)[0].lower()
    return (name.endswith((".pyc", ".pyo")) or "/__pycache__" in f"/{name}"
            or top in _LEFT_OUT
            or (top.endswith((".dist-info", ".egg-info")) and base in _LEFT_OUT)
            or (top.endswith(".pth") and "distutils" in top))


def export(card: dict[str, Any], port: int, target: str) -> Path:
    """Write the agent's install archive to ``target``; its path."""
    import io
    import tarfile  # here: every agent's start imports this module for EXPORT_ENV

    folder, command = _entry_point()
    manifest = {"card": card, "command": command, "a2a_port": port,
                "python": f"{sys.version_info[0]}.{sys.version_info[1]}"}
    out = Path(target)
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(out.name + ".partial")
    with tarfile.open(partial, "w:gz") as archive:
        data = json.dumps(manifest, indent=1).encode()
        info = tarfile.TarInfo(MANIFEST)
        info.size, info.mode = len(data), 0o644
        archive.addfile(info, io.BytesIO(data))
        for path in sorted(folder.rglob("*")):
            relative = path.relative_to(folder).as_posix()
            if _skip(relative) or path.is_symlink() or path in (out, partial) \
                    or not path.is_file():
                continue  # a link could point anywhere in the image
            archive.add(path, f"app/{relative}", recursive=False)
        for relative, path in sorted(_package_files(folder).items()):
            archive.add(path, f"site/{relative}", recursive=False)
    os.replace(partial, out)
    return out
