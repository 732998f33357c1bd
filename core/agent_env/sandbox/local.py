"""The ``local`` sandbox provider: a work folder on this machine, no Docker, no VM.

A sandbox is a folder under the state root (``<state>/sandboxes/local/<id>``). Paths under
``/app`` (and relative paths) map into its ``app/`` folder; anything that would land outside it
(``../``, another absolute path, a symlink pointing out) is refused with
:class:`PathOutsideSandbox`. Commands run as ``bash -c`` subprocesses in their own process group,
with ``/app`` in the command text pointing at the folder and ``sudo`` stripped (the folder
belongs to the user already). Each running command's group is recorded in the folder
(``processes/<pgid>``, holding the leader's start time), so a ``terminate`` from another process
(``agent-env gc`` after the run was killed) ends the commands too, not only the folder.

A command may leave its group: ``(sleep 300 &)`` outlives its shell, ``setsid`` starts a new
session, ``nohup`` ignores hang-ups. So every command also carries ``AGENTENV_LOCAL_SANDBOX=<id>``
in its environment, which its children inherit whatever group or session they move to, and
``terminate`` ends every process of this user that carries it (read from ``/proc``). It
isolates nothing: it exists so that tasks run with no setup.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
from pathlib import Path, PurePosixPath
from typing import Any, ClassVar

from agent_env.sandbox.base import (
    ExecResult,
    PathOutsideSandbox,
    Sandbox,
    SandboxError,
    SandboxProvider,
    SandboxSpec,
)
from agent_env.sandbox.ownership import process_start

APP_ROOT = PurePosixPath("/app")
#: Exit code of a command stopped by its timeout (as coreutils' ``timeout``).
TIMEOUT_EXIT_CODE = 124

_APP_IN_TEXT = re.compile(r"(?<![\w./-])/app(?=/|\b|$)")
_SUDO = re.compile(r"(?<![\w./-])sudo(?:\s+-[A-Za-z]+(?:\s+(?![-/])\w+)?)*\s+")
_META = "sandbox.json"
_PROCESSES = "processes"
#: The variable every command of a sandbox carries (see the module docstring).
MARKER = "AGENTENV_LOCAL_SANDBOX"


def strip_sudo(command: str) -> str:
    """Drop ``sudo`` (and its flags) from a command: the work folder is the user's already."""
    return _SUDO.sub("", command)


class LocalSandbox(Sandbox):
    """A work folder; ``/app`` maps to ``<folder>/app``."""

    provider_name = "local"

    def __init__(self, sandbox_id: str, folder: Path, env_vars: dict[str, str] | None = None):
        self.id = sandbox_id
        self.folder = folder
        self.app = folder / "app"
        self.env_vars = dict(env_vars or {})
        self._running: set[Any] = set()

    # -- paths ---------------------------------------------------------------------------

    def host_path(self, path: str) -> Path:
        """The host path for a sandbox path; refuses anything that escapes ``/app``."""
        pure = PurePosixPath(path)
        if pure.is_absolute():
            try:
                relative = pure.relative_to(APP_ROOT)
            except ValueError:
                raise PathOutsideSandbox(
                    f"'{path}' is outside the local sandbox (only /app and paths under it "
                    "are inside)"
                ) from None
        else:
            relative = pure
        candidate = self.app.joinpath(*relative.parts)
        root = os.path.realpath(self.app)
        resolved = os.path.realpath(candidate)
        if resolved != root and not resolved.startswith(root + os.sep):
            raise PathOutsideSandbox(
                f"'{path}' escapes the local sandbox (through '..' or a symlink out of /app)"
            )
        return candidate

    def map_command(self, command: str) -> str:
        """``/app`` in a command points at the work folder; ``sudo`` is stripped."""
        return _APP_IN_TEXT.sub(lambda _m: str(self.app), strip_sudo(command))

    # -- the contract --------------------------------------------------------------------

    async def exec(
        self,
        command: str | list[str],
        *,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        timeout: float | None = None,
    ) -> ExecResult:
        import asyncio

        if not self.folder.is_dir():
            return ExecResult(-1, "", f"the local sandbox {self.id} was torn down")
        if isinstance(command, list):
            argv = [self.map_command(part) for part in command]
            if argv and argv[0] == "sudo":
                argv = argv[1:]
        else:
            argv = ["bash", "-c", self.map_command(command)]
        workdir = self.host_path(cwd or str(APP_ROOT))
        if not workdir.is_dir():
            return ExecResult(1, "", f"cwd {cwd} does not exist in the sandbox")
        environment = {**os.environ, **self.env_vars, **(env or {}), "HOME": str(self.app),
                       MARKER: self.id}
        process = await asyncio.create_subprocess_exec(
            *argv,
            cwd=workdir,
            env=environment,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,  # its own process group: we stop it and its children
        )
        self._running.add(process)
        record = self._record(process.pid)
        try:
            out, err = await asyncio.wait_for(process.communicate(), timeout)
        except TimeoutError:
            _kill_group(process)
            await process.wait()
            return ExecResult(TIMEOUT_EXIT_CODE, "", f"timed out after {timeout:g}s")
        finally:
            if process.returncode is None:  # cancelled: leave nothing running
                _kill_group(process)
            self._running.discard(process)
            if record is not None:
                record.unlink(missing_ok=True)
        code = process.returncode if process.returncode is not None else -1
        if process.returncode is not None and process.returncode < 0:
            code = 128 - process.returncode  # killed by signal N: 128+N, as a shell says (-1
            # is the contract's "lost", which a command killed by SIGHUP must not read as)
        return ExecResult(code, out.decode(errors="replace"), err.decode(errors="replace"))

    async def put_file(self, path: str, data: bytes, *, mode: int = 0o644) -> None:
        target = self.host_path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        self.host_path(path)  # a folder made above cannot be a symlink, but check once more
        temporary = target.with_name(f".{target.name}.{secrets.token_hex(4)}.tmp")
        temporary.write_bytes(data)
        temporary.chmod(mode)
        os.replace(temporary, target)

    async def get_file(self, path: str) -> bytes:
        target = self.host_path(path)
        if not target.is_file():
            raise FileNotFoundError(f"{path} does not exist in the local sandbox {self.id}")
        return target.read_bytes()

    async def expose(self, port: int) -> str:
        return f"http://127.0.0.1:{port}"

    async def terminate(self) -> None:
        for process in list(self._running):
            _kill_group(process)
        self._kill_recorded()
        kill_marked(self.id)
        shutil.rmtree(self.folder, ignore_errors=True)

    def _record(self, pid: int) -> Path | None:
        """Note a command's process group (its leader's pid and start time) in the folder."""
        folder = self.folder / _PROCESSES
        try:
            folder.mkdir(exist_ok=True)
            record = folder / str(pid)
            record.write_text(str(process_start(pid)), encoding="ascii")
        except OSError:
            return None
        return record

    def _kill_recorded(self) -> None:
        """End the process groups recorded by whichever process ran the commands.

        A group is ours when its leader still has the recorded start time, or when the leader
        is gone (Linux does not reuse a pid while a group of that id exists); a pid reused by
        an unrelated process has another start time and is left alone."""
        folder = self.folder / _PROCESSES
        if not folder.is_dir():
            return
        for record in folder.iterdir():
            try:
                pgid, started = int(record.name), record.read_text(encoding="ascii").strip()
            except (OSError, ValueError):
                continue
            now = process_start(pgid)
            if now is None or str(now) == started:
                try:
                    os.killpg(pgid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass

    def describe(self) -> dict[str, Any]:
        return {"id": self.id, "provider": self.provider_name, "folder": str(self.folder)}


def marked_processes(sandbox_id: str) -> list[int]:
    """The pids of this user's processes whose environment carries ``MARKER=sandbox_id``
    (none where there is no ``/proc`` to read)."""
    wanted = f"{MARKER}={sandbox_id}".encode()
    found: list[int] = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return found
    me = os.getpid()
    for entry in entries:
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as handle:
                environ = handle.read()
        except OSError:  # gone, or another user's
            continue
        if wanted in environ.split(b"\0"):
            found.append(int(entry))
    return found


def kill_marked(sandbox_id: str) -> None:
    """End every process that carries the sandbox's marker; again while new ones appear (a
    process forking as it is killed), at most a few rounds."""
    for _ in range(5):
        pids = marked_processes(sandbox_id)
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


def _kill_group(process: Any) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


class LocalSandboxProvider(SandboxProvider):
    """Work folders under ``<state>/sandboxes/local`` (or ``root`` from config)."""

    name: ClassVar[str] = "local"
    modes: ClassVar[tuple[str, ...]] = ("vm", "container")

    def __init__(self, root: str | os.PathLike[str] | None = None) -> None:
        if root is None:
            from agent_env.runtime import current

            root = current().config.state_root / "sandboxes" / "local"
        self.root = Path(root)

    async def create(self, spec: SandboxSpec) -> LocalSandbox:
        self.check_spec(spec)
        sandbox_id = f"local-{secrets.token_hex(6)}"
        folder = self.root / sandbox_id
        try:
            (folder / "app").mkdir(parents=True, mode=0o700)
            meta = {"id": sandbox_id, "name": spec.name, "labels": dict(spec.labels),
                    "env_vars": dict(spec.env_vars), "pid": os.getpid()}
            (folder / _META).write_text(json.dumps(meta), encoding="utf-8")
        except OSError as exc:
            shutil.rmtree(folder, ignore_errors=True)
            raise SandboxError(f"cannot create a local sandbox in {self.root}: {exc}") from exc
        return LocalSandbox(sandbox_id, folder, spec.env_vars)

    async def attach(self, sandbox_id: str) -> LocalSandbox | None:
        if not re.fullmatch(r"local-[0-9a-f]+", sandbox_id):
            return None
        folder = self.root / sandbox_id
        if not folder.is_dir():
            return None
        return LocalSandbox(sandbox_id, folder, _read_meta(folder).get("env_vars"))

    async def list_sandboxes(self, labels: dict[str, str]) -> list[Sandbox]:
        found: list[Sandbox] = []
        if not self.root.is_dir():
            return found
        for folder in sorted(self.root.iterdir()):
            meta = _read_meta(folder)
            have = meta.get("labels") or {}
            if meta and all(have.get(k) == v for k, v in labels.items()):
                found.append(LocalSandbox(folder.name, folder, meta.get("env_vars")))
        return found


def _read_meta(folder: Path) -> dict[str, Any]:
    try:
        return json.loads((folder / _META).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
