"""Running a command-line agent once per prompt: what an A2A agent that wraps a CLI (Claude
Code, Codex...) needs around the process. The prompt goes on stdin, stdout is read as JSON lines
(a line that is not JSON is kept as ``{"type": "agentenv.unparsed"}``), the last stderr lines are
kept for the error a failed prompt reports, and a cancelled prompt kills the whole process group
(the CLI's own children too).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import os
import signal
from pathlib import Path
from typing import Any

import attrs

#: How many of the CLI's last stderr lines an error quotes.
STDERR_LINES = 20


@attrs.define
class CliRun:
    """One CLI process: its stdout read as JSON lines, the last stderr lines kept for errors.
    Cancelling the prompt kills the whole process group (the CLI's own children too)."""

    process: asyncio.subprocess.Process
    stderr: collections.deque[str] = attrs.field(
        factory=lambda: collections.deque(maxlen=STDERR_LINES))
    drain: asyncio.Task[None] | None = None

    @classmethod
    async def start(cls, args: list[str], stdin_text: str, env: dict[str, str],
                    cwd: Path) -> CliRun:
        process = await asyncio.create_subprocess_exec(
            *args, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, env=env, cwd=str(cwd), start_new_session=True,
            limit=64 * 1024 * 1024)
        run = cls(process)
        run.drain = asyncio.create_task(run._read_stderr())
        assert process.stdin is not None
        process.stdin.write(stdin_text.encode())
        with contextlib.suppress(ConnectionError):
            await process.stdin.drain()
        process.stdin.close()
        return run

    async def _read_stderr(self) -> None:
        assert self.process.stderr is not None
        async for line in self.process.stderr:
            self.stderr.append(line.decode("utf-8", "replace").rstrip())

    async def events(self) -> Any:
        assert self.process.stdout is not None
        async for raw in self.process.stdout:
            line = raw.decode("utf-8", "replace").strip()
            if not line:
                continue
            try:
                event = json.loads(line)
            except ValueError:
                event = None
            yield event if isinstance(event, dict) else {"type": "agentenv.unparsed",
                                                         "line": line[:4000]}

    async def wait(self) -> int:
        code = await self.process.wait()
        if self.drain is not None:
            await self.drain
        return code

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)

    def stderr_tail(self) -> str:
        lines = [line for line in self.stderr if line.strip()]
        return ("\n--- last stderr lines of the CLI ---\n" + "\n".join(lines)) if lines else ""
