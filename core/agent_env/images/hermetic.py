"""Hermetic env builds: every env image gets THIS repository's protocol package.

Why: ``agentenv-framework-protocol`` on PyPI is the reference project's (versions 0.1.x, all
higher than ours), so a Dockerfile that says ``pip install agentenv-framework-protocol`` (or a
``requirements.txt`` naming it) would silently install theirs. We never publish ours there.

How (the choice, and why this one): the build sends a *copy* of the context, to which we add
``.agentenv-build/`` holding a wheel of our ``protocol/`` and a pip constraints file that pins the
name to that wheel by URL (``agentenv-framework-protocol @ file:///opt/agentenv/wheels/...``).
Right after every ``FROM`` line of the Dockerfile copy we add::

    COPY .agentenv-build/ /opt/agentenv/
    ENV PIP_CONSTRAINT=/opt/agentenv/constraints.txt

so every ``pip install`` in the image (system Python or a venv made in the Dockerfile, plain
name or ``-r requirements.txt``) resolves our wheel from inside the image, and pip still fetches
the wheel's own dependencies (aiohttp, attrs, cattrs) as the Dockerfile would anyway. A stock
Dockerfile (``FROM python:3.11-slim``, ``COPY requirements.txt``, ``RUN pip install -r ...``)
works unchanged; the user's files on disk are never touched. The alternative, a derived base
image with the wheel pre-installed, would need the ``FROM`` line rewritten anyway and would not
reach a venv made inside the image. A context that *pins* the protocol to versions ours does not
satisfy (the reference's bundles say ``agentenv-framework-protocol==0.1.379`` or ``>=0.1.372`` in
``requirements.txt``) asked for the reference's release by name: the build then yields to the pin
(no injection; :func:`conflicting_pin` finds it and the progress says so), since the PyPI
protocol speaks the same wire behind our gateway. A Dockerfile that installs with ``uv`` does not
read ``PIP_CONSTRAINT``. Pass ``hermetic_build=False`` to
:func:`agent_env.images.plan.plan_build` (and docker_env's ``build_image``) to send the context
untouched. Engine-independent, so every provider that builds images injects the same way.

The wheel is built once per content of ``protocol/`` (found from the installed
``agentenv_protocol.__file__``: its parent's parent holds ``pyproject.toml``) and cached under
the state root; when the protocol is installed from a wheel instead, the installed files are
packed back into a wheel.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import os
import re
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import attrs

from agent_env.errors import UserError

if TYPE_CHECKING:
    from agent_env.images.context import ContextEntry

PROTOCOL_DISTRIBUTION = "agentenv-framework-protocol"
PROTOCOL_PACKAGE = "agentenv_protocol"
#: Bumped when the injection changes, so images built the old way get new tags.
INJECTION_VERSION = "1"
CONTEXT_FOLDER = ".agentenv-build"
IMAGE_FOLDER = "/opt/agentenv"

_SKIP_DIRS = {"__pycache__", "build", "dist", ".pytest_cache", ".ruff_cache", ".mypy_cache"}


@attrs.frozen
class ProtocolWheel:
    """Our protocol as a wheel file, with the digest of what it was built from."""

    path: Path
    version: str
    digest: str
    origin: str  # "source <folder>" or "installed <folder>"


def default_cache_dir() -> Path:
    from agent_env.config import ensure_private_dir
    from agent_env.runtime import current

    return ensure_private_dir(current().config.state_root / "images" / "wheels")


def protocol_source_dir() -> Path | None:
    """The ``protocol/`` project folder when the package is installed from source, else None."""
    import agentenv_protocol

    project = Path(agentenv_protocol.__file__).resolve().parent.parent
    pyproject = project / "pyproject.toml"
    if pyproject.is_file() and re.search(
        rf'name\s*=\s*"{PROTOCOL_DISTRIBUTION}"', pyproject.read_text(encoding="utf-8")
    ):
        return project
    return None


def source_digest(project: Path) -> str:
    """A sha256 of the protocol project's sources (caches, builds and hidden files left out)."""
    digest = hashlib.sha256(b"agentenv-protocol-v1\0")
    for folder, dirs, files in os.walk(project):
        dirs[:] = sorted(
            d for d in dirs
            if d not in _SKIP_DIRS and not d.startswith(".") and not d.endswith(".egg-info")
        )
        for name in sorted(files):
            if name.endswith((".pyc", ".pyo")) or name.startswith("."):
                continue
            path = Path(folder) / name
            relative = path.relative_to(project).as_posix()
            digest.update(relative.encode() + b"\0" + hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def _build_from_source(project: Path, out: Path) -> Path:
    """Build a wheel with the project's PEP 517 backend, in a child process (cwd matters)."""
    code = (
        "import os, sys; os.chdir(sys.argv[1]); import hatchling.build as b; "
        "print(b.build_wheel(sys.argv[2]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(project), str(out)], capture_output=True, text=True
    )
    if done.returncode != 0:  # no hatchling here: let pip fetch the backend in isolation
        done = subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(project)],
            capture_output=True,
            text=True,
        )
    wheels = sorted(out.glob("*.whl"))
    if done.returncode != 0 or not wheels:
        raise UserError(
            f"cannot build a wheel of {project}",
            notes=(done.stderr or done.stdout).splitlines()[-10:],
        )
    return wheels[0]


def _record_hash(data: bytes) -> str:
    raw = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"sha256={raw}"


def _wheel_from_installed(out: Path) -> tuple[Path, str]:
    """Pack the installed distribution's files back into a wheel (no source tree here)."""
    from importlib import metadata

    dist = metadata.distribution(PROTOCOL_DISTRIBUTION)
    files = sorted(
        f for f in dist.files or ()
        if "__pycache__" not in f.parts and not str(f).endswith((".pyc", "RECORD", "INSTALLER"))
        and not str(f).endswith(("direct_url.json", "REQUESTED")) and ".." not in f.parts
    )
    if not files:
        raise UserError(f"the installed {PROTOCOL_DISTRIBUTION} lists no files to pack")
    name = dist.metadata["Name"].replace("-", "_")
    version = dist.version
    dist_info = next(
        (f.parts[0] for f in files if f.parts[0].endswith(".dist-info")),
        f"{name}-{version}.dist-info",
    )
    digest = hashlib.sha256(b"agentenv-protocol-installed-v1\0")
    rows = []
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as wheel:
        for file in files:
            # typed as the SimplePath protocol; an installed (not zipped) distribution's is a Path
            data = Path(str(dist.locate_file(file))).read_bytes()
            arcname = file.as_posix()
            digest.update(arcname.encode() + b"\0" + hashlib.sha256(data).digest())
            info = zipfile.ZipInfo(arcname, date_time=(1980, 1, 1, 0, 0, 0))
            wheel.writestr(info, data)
            rows.append((arcname, _record_hash(data), str(len(data))))
        record = io.StringIO()
        csv.writer(record, lineterminator="\n").writerows([*rows, (f"{dist_info}/RECORD", "", "")])
        record_info = zipfile.ZipInfo(f"{dist_info}/RECORD", (1980, 1, 1, 0, 0, 0))
        wheel.writestr(record_info, record.getvalue())
    path = out / f"{name}-{version}-py3-none-any.whl"
    path.write_bytes(buffer.getvalue())
    return path, digest.hexdigest()


def protocol_wheel(cache_dir: Path | None = None) -> ProtocolWheel:
    """Our protocol as a wheel, built once per source digest and cached."""
    cache_dir = cache_dir or default_cache_dir()
    project = protocol_source_dir()
    if project is not None:
        digest = source_digest(project)
        origin = f"source {project}"
    else:
        digest, origin = "", "installed"
    if digest:
        cached = sorted((cache_dir / digest[:16]).glob("*.whl"))
        if cached:
            return ProtocolWheel(cached[0], _wheel_version(cached[0]), digest, origin)
    cache_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache_dir) as scratch:
        if project is not None:
            built = _build_from_source(project, Path(scratch))
            after = source_digest(project)
            if after != digest:  # edited while we built: name the wheel by what it holds
                built.unlink()
                digest = after
                built = _build_from_source(project, Path(scratch))
        else:
            built, digest = _wheel_from_installed(Path(scratch))
            origin = f"installed {built.name}"
        target = cache_dir / digest[:16]
        target.mkdir(exist_ok=True)
        final = target / built.name
        os.replace(built, final)  # atomic: a concurrent build sees the whole file or none
    return ProtocolWheel(final, _wheel_version(final), digest, origin)


def _wheel_version(path: Path) -> str:
    return path.name.split("-")[1]


# -- putting the wheel into a build -------------------------------------------------------


def context_files(wheel: ProtocolWheel) -> dict[str, bytes]:
    """Files to add to the context copy: the wheel and a constraints file pinning it by URL."""
    in_image = f"{IMAGE_FOLDER}/wheels/{wheel.path.name}"
    constraints = (
        "# Added by AgentEnv: this repository's protocol, not the same-named PyPI package.\n"
        f"{PROTOCOL_DISTRIBUTION} @ file://{in_image}\n"
    )
    return {
        f"{CONTEXT_FOLDER}/wheels/{wheel.path.name}": wheel.path.read_bytes(),
        f"{CONTEXT_FOLDER}/constraints.txt": constraints.encode(),
    }


_FROM = re.compile(r"^\s*FROM\s", re.IGNORECASE)


def after_each_from(text: str, added: list[str]) -> str:
    """``text`` with ``added`` lines after every ``FROM`` instruction (continuations
    respected)."""
    lines = text.splitlines()
    out: list[str] = []
    in_from = False
    for line in lines:
        out.append(line)
        if not in_from and _FROM.match(line):
            in_from = True
        if in_from and not line.rstrip().endswith("\\"):
            in_from = False
            out.extend(added)
    return "\n".join(out) + "\n"


def inject_into_dockerfile(text: str) -> str:
    """Add our COPY and ENV lines after every ``FROM`` instruction (continuations respected)."""
    return after_each_from(text, [f"COPY {CONTEXT_FOLDER}/ {IMAGE_FOLDER}/",
                                  f"ENV PIP_CONSTRAINT={IMAGE_FOLDER}/constraints.txt"])


# -- a context that pins the protocol to a version ours is not ---------------------------------

_REQUIREMENT_FILE = re.compile(r"(^|[-_.])(requirements|constraints)[^/]*\.(txt|in)$")
_PIN_IN_TEXT = re.compile(
    r"agentenv[-_.]framework[-_.]protocol\s*(?:\[[^\]]*\]\s*)?"
    r"((?:[=!<>~]=?|===)\s*[^\s'\"\\;]+"
    r"(?:\s*,\s*(?:[=!<>~]=?|===)\s*[^\s'\"\\;,]+)*)",
    re.IGNORECASE,
)


def _unsatisfied(specifier_text: str, version: str) -> bool:
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    try:
        return not SpecifierSet(specifier_text.replace(" ", "")).contains(
            version, prereleases=True)
    except InvalidSpecifier:
        return False


def conflicting_pin(files: dict[str, str], version: str) -> str | None:
    """``path: line`` of the first requirement on our protocol that ``version`` does not meet.

    ``files`` maps context paths to their text: requirement and constraint files, and the
    Dockerfile (``pip install 'agentenv-framework-protocol==0.1.379'``)."""
    for path, text in sorted(files.items()):
        for raw in text.splitlines():
            line = raw.split(" #", 1)[0].strip()
            if line.startswith("#"):
                continue
            for match in _PIN_IN_TEXT.finditer(line):
                if _unsatisfied(match.group(1), version):
                    return f"{path}: {match.group(0).strip()}"
    return None


def pin_candidates(entries: Iterable[ContextEntry], dockerfile: str) -> dict[str, str]:
    """The context files where a protocol pin may be written (see :func:`conflicting_pin`)."""
    found: dict[str, str] = {}
    for entry in entries:
        name = entry.path.rsplit("/", 1)[-1]
        if entry.kind == "file" and (entry.path == dockerfile or _REQUIREMENT_FILE.search(name)):
            try:
                found[entry.path] = entry.source.read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
    return found
