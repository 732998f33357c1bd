"""A Harbor task's container as an AgentEnv env (written by ``agent-env bundle import harbor``).

Harbor agents work inside the task's container; AgentEnv agents use an env's MCP tools. This
server runs in the task's own image and gives the agent that container: ``bash`` (in the
image's working directory), ``read_file`` and ``write_file``. The tests stay out of the image
and out of the agent's reach: the verifier sends them over the data plane after the agent is
done (``data/add`` with ``harbor_tests``), and this server does what Harbor does with them:
empty ``/tests`` and ``/logs/verifier``, write the tests to ``/tests``, run ``bash
/tests/test.sh`` (its output to ``/logs/verifier/test-stdout.txt``) and read the reward from
``/logs/verifier/reward.txt`` or ``reward.json``. ``data/get`` answers how that run went; the
run goes on in the background, since a gateway call lasts at most 30 s.

A task whose verifier runs in a container of its own (``[verifier] environment_mode =
"separate"``) uses two more parts: ``harbor_collect`` (in the agent's container: read the
task's ``artifacts`` and ``/logs/artifacts``; ``data/get`` answers them as
``harbor_collected``) and ``harbor_files`` (in the verifier's container, whose image holds
``/tests`` itself: write those files where they were, then run the tests).

The ``oracle`` agent sends the task's reference solution the same way (``harbor_solution``):
it is written to ``/solution`` only then and ``bash /solution/solve.sh`` runs as root in the
working directory, with the task's ``[solution] env``; ``data/get`` answers how it went as
``harbor_solution_result``.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import posixpath
import shutil
import signal
import time
from pathlib import Path
from typing import Any

from agentenv_protocol import (
    AgentEnvEnvironment,
    DataPart,
    add_data,
    environment_card,
    get_data,
    tool,
)

#: The env gateway ends a call after 30 s: a command gets at most this long.
MAX_COMMAND_SECONDS = 25.0
OUTPUT_LIMIT = 32 * 1024
TESTS = Path("/tests")
SOLUTION = Path("/solution")
VERIFIER_LOGS = Path("/logs/verifier")
#: Harbor's convention: what lands here is collected with the task's artifacts.
ARTIFACTS = Path("/logs/artifacts")
#: The most artifacts one collect carries (they travel through the gateway as JSON).
MAX_COLLECT_BYTES = 8 * 1024 * 1024


def _write_tree(root: Path, files: dict[str, Any]) -> None:
    """``root`` emptied, then ``{relative path: {"data": base64, "mode"}}`` written under it."""
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    for name, meta in files.items():
        parts = name.split("/")
        if posixpath.isabs(name) or ".." in parts:
            raise ValueError(f"file path escapes {root}: {name!r}")
        target = root.joinpath(*parts)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(base64.b64decode(meta["data"]))
        os.chmod(target, int(meta.get("mode", 0o644)))


def _collect(paths: list[str]) -> dict[str, Any]:
    """``{"files": {absolute path: {"data": base64, "mode": int}}, "missing": [...]}`` of every
    file under ``paths`` (and ``/logs/artifacts``): an artifact the agent never wrote is
    missing, for the tests to judge; ``{"error": why}`` when they are too big."""
    files: dict[str, Any] = {}
    missing: list[str] = []
    total = 0
    for raw in [*paths, str(ARTIFACTS)]:
        root = Path(raw)
        if not root.is_absolute() or ".." in root.parts:
            return {"error": f"artifact path {raw!r} is not an absolute path"}
        if not root.exists():
            if root != ARTIFACTS:
                missing.append(raw)
            continue
        found = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
        for path in found:
            total += path.stat().st_size
            if total > MAX_COLLECT_BYTES:
                return {"error": f"the artifacts are larger than "
                                 f"{MAX_COLLECT_BYTES // 1024 // 1024} MiB"}
            files[str(path)] = {"data": base64.b64encode(path.read_bytes()).decode("ascii"),
                                "mode": path.stat().st_mode & 0o777}
    return {"files": files, "missing": missing}


def _tail(text: str) -> str:
    if len(text) <= OUTPUT_LIMIT:
        return text
    return f"[... {len(text) - OUTPUT_LIMIT} characters cut ...]\n" + text[-OUTPUT_LIMIT:]


async def _run(command: list[str], cwd: str, timeout: float,
               stdout: Any = asyncio.subprocess.PIPE) -> tuple[int | None, str]:
    """Run ``command`` in its own process group; on timeout the whole group is killed."""
    proc = await asyncio.create_subprocess_exec(
        *command, cwd=cwd, stdin=asyncio.subprocess.DEVNULL, stdout=stdout,
        stderr=asyncio.subprocess.STDOUT, start_new_session=True)
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), timeout)
    except TimeoutError:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        await proc.wait()
        return None, f"timed out after {timeout:g}s"
    return proc.returncode, (out or b"").decode("utf-8", errors="replace")


def _reward(logs: Path) -> dict[str, float] | str:
    """The rewards the tests wrote (``{"reward": x}`` for reward.txt), or why there are none."""
    text_file, json_file = logs / "reward.txt", logs / "reward.json"
    try:
        if text_file.is_file():
            return {"reward": float(text_file.read_text().strip())}
        if json_file.is_file():
            data = json.loads(json_file.read_text())
            if isinstance(data, (int, float)) and not isinstance(data, bool):
                return {"reward": float(data)}
            if isinstance(data, dict) and data and all(
                    isinstance(v, (int, float)) and not isinstance(v, bool)
                    for v in data.values()):
                return {str(k): float(v) for k, v in data.items()}
            return f"reward.json holds no numbers: {json_file.read_text()[:200]!r}"
    except (ValueError, OSError) as exc:
        return f"the reward file is unreadable: {exc}"
    return "the tests wrote neither /logs/verifier/reward.txt nor reward.json"


@environment_card(name="harbor", description="The task's container: run shell commands there, "
                                             "read and write its files.")
class HarborShell(AgentEnvEnvironment):
    def __init__(self) -> None:
        self.workdir = os.getcwd()
        self.result: dict[str, Any] = {"state": "not run"}
        self._run: asyncio.Task[None] | None = None
        self.collected: dict[str, Any] | None = None
        self.solution: dict[str, Any] = {"state": "not run"}
        self._solving: asyncio.Task[None] | None = None

    @tool(name="bash")
    async def bash(self, command: str, timeout_sec: float = MAX_COMMAND_SECONDS) -> dict:
        """Run a bash command in the task's working directory; answers its exit code and
        output (stdout and stderr together). A command gets at most 25 s: start longer work in
        the background (``nohup ... &``) and check on it."""
        timeout = max(0.1, min(float(timeout_sec), MAX_COMMAND_SECONDS))
        code, output = await _run(["bash", "-c", command], self.workdir, timeout)
        return {"exit_code": code, "output": _tail(output)}

    @tool(name="read_file")
    def read_file(self, path: str) -> str:
        """The text of a file (relative paths are from the working directory)."""
        return _tail(Path(self.workdir, path).read_text(encoding="utf-8", errors="replace"))

    @tool(name="write_file")
    def write_file(self, path: str, content: str) -> str:
        """Write a text file (parent folders are made); answers where it went."""
        target = Path(self.workdir, path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content, encoding="utf-8")
        return f"wrote {len(content)} characters to {target}"

    @add_data
    def run_tests(self, parts: list) -> None:
        """``{"harbor_tests": {path: {"data": base64, "mode": int}}, "timeout_sec": n}``: start
        the tests (parts without ``harbor_tests`` are not for this server and are ignored)."""
        for part in parts:
            data = getattr(part, "data", None)
            if not isinstance(data, dict):
                continue
            if isinstance(data.get("harbor_collect"), list):
                self.collected = _collect([str(p) for p in data["harbor_collect"]])
            elif isinstance(data.get("harbor_solution"), dict):
                if self._solving is not None and not self._solving.done():
                    raise RuntimeError("the solution is already running")
                _write_tree(SOLUTION, data["harbor_solution"])
                env = {str(k): str(v) for k, v in (data.get("env") or {}).items()}
                self.solution = {"state": "running", "started": time.time()}
                self._solving = asyncio.get_running_loop().create_task(
                    self._solve(float(data.get("timeout_sec") or 600), env))
            elif isinstance(data.get("harbor_tests"), dict) or \
                    isinstance(data.get("harbor_files"), dict):
                if self._run is not None and not self._run.done():
                    raise RuntimeError("the tests are already running")
                timeout = float(data.get("timeout_sec") or 600)
                if isinstance(data.get("harbor_tests"), dict):
                    self._prepare(data["harbor_tests"])
                else:  # a verifier container: its image holds /tests
                    self._place(data["harbor_files"])
                self.result = {"state": "running", "started": time.time()}
                self._run = asyncio.get_running_loop().create_task(self._test(timeout))

    async def _solve(self, timeout: float, env: dict[str, str]) -> None:
        started = time.monotonic()
        code, output = await _run(["env", *(f"{k}={v}" for k, v in env.items()), "bash",
                                   str(SOLUTION / "solve.sh")], self.workdir, timeout)
        self.solution = {"state": "done", "exit_code": code,
                         "seconds": round(time.monotonic() - started, 3),
                         "output_tail": output[-2000:]}

    def _place(self, files: dict[str, Any]) -> None:
        """The agent's artifacts, written where they were in its container."""
        shutil.rmtree(VERIFIER_LOGS, ignore_errors=True)
        VERIFIER_LOGS.mkdir(parents=True)
        for name, meta in files.items():
            target = Path(name)
            if not target.is_absolute() or ".." in target.parts:
                raise ValueError(f"artifact path is not absolute: {name!r}")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(base64.b64decode(meta["data"]))
            os.chmod(target, int(meta.get("mode", 0o644)))

    def _prepare(self, files: dict[str, Any]) -> None:
        shutil.rmtree(VERIFIER_LOGS, ignore_errors=True)
        VERIFIER_LOGS.mkdir(parents=True)
        _write_tree(TESTS, files)
        os.chmod(TESTS / "test.sh", 0o755)

    async def _test(self, timeout: float) -> None:
        started = time.monotonic()
        with open(VERIFIER_LOGS / "test-stdout.txt", "wb") as log:
            code, why = await _run(["bash", "/tests/test.sh"], self.workdir, timeout, stdout=log)
        output = (VERIFIER_LOGS / "test-stdout.txt").read_text(errors="replace")
        self.result = {"state": "done", "exit_code": code,
                       "seconds": round(time.monotonic() - started, 3),
                       "output_tail": output[-2000:] + ("" if code is not None else f"\n{why}"),
                       "rewards": _reward(VERIFIER_LOGS)}

    @get_data
    def test_result(self) -> list:
        parts = [DataPart({"harbor_result": self.result}),
                 DataPart({"harbor_solution_result": self.solution})]
        if self.collected is not None:
            parts.append(DataPart({"harbor_collected": self.collected}))
        return parts


if __name__ == "__main__":
    HarborShell().serve()
