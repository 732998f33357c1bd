"""Running a command-line agent once per prompt: what an A2A agent that wraps a CLI (Claude
Code, Codex...) needs around the process. The prompt goes on stdin, stdout is read as JSON lines
(a line that is not JSON is kept as ``{"type": "agentenv.unparsed"}``), the last stderr lines are
kept for the error a failed prompt reports, and a cancelled prompt kills the whole process group
(the CLI's own children too).

:class:`PrestartedRun` keeps one such process started ahead of the next prompt, for an agent
whose per-prompt process spends its first seconds importing (a Python agent loop: the imports
happen before it reads its job from stdin, so by the time a prompt comes they are done).
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
        """Start the process and give it ``stdin_text`` (then end of input)."""
        run = await cls.spawn(args, env, cwd)
        await run.send(stdin_text)
        return run

    @classmethod
    async def spawn(cls, args: list[str], env: dict[str, str], cwd: Path) -> CliRun:
        """Start the process without its input yet (:meth:`send` gives it)."""
        process = await asyncio.create_subprocess_exec(
            *args, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, env=env, cwd=str(cwd), start_new_session=True,
            limit=64 * 1024 * 1024)
        run = cls(process)
        run.drain = asyncio.create_task(run._read_stderr())
        return run

    async def send(self, stdin_text: str) -> None:
        """Write the process's whole input and close it."""
        stdin = self.process.stdin
        assert stdin is not None
        stdin.write(stdin_text.encode())
        with contextlib.suppress(ConnectionError):
            await stdin.drain()
        stdin.close()

    @property
    def alive(self) -> bool:
        return self.process.returncode is None

    async def __aenter__(self) -> CliRun:
        return self

    async def __aexit__(self, kind: type[BaseException] | None, *rest: object) -> None:
        """Leaving with an exception (a cancelled prompt: its timeout, ``tasks/cancel``)
        kills the process group."""
        if kind is not None:
            self.kill()

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

    async def discard(self) -> None:
        """Kill the process and reap it (its pipes closed), for one that will not be used."""
        self.kill()
        if self.process.stdin is not None:
            self.process.stdin.close()
        await self.wait()

    def stderr_tail(self) -> str:
        lines = [line for line in self.stderr if line.strip()]
        return ("\n--- last stderr lines of the CLI ---\n" + "\n".join(lines)) if lines else ""


@attrs.define
class PrestartedRun:
    """The per-prompt process of one command line, started one prompt ahead.

    :meth:`take` hands out the process started earlier (or starts one, the first time or if
    it died) and at once starts the next prompt's; :meth:`start` starts the first ahead of any
    prompt (call it from the agent's ``setup``); :meth:`close` kills the one waiting. ``env``
    and ``cwd`` are fixed: whatever differs per prompt goes in the process's input.
    """

    args: list[str]
    env: dict[str, str]
    cwd: Path
    spare: CliRun | None = None

    async def start(self) -> None:
        if self.spare is None or not self.spare.alive:
            self.cwd.mkdir(parents=True, exist_ok=True)
            self.spare = await CliRun.spawn(self.args, self.env, self.cwd)

    async def take(self, stdin_text: str) -> CliRun:
        """The process for this prompt, already given ``stdin_text``."""
        run, self.spare = self.spare, None
        if run is None or not run.alive:
            if run is not None:
                await run.discard()
            self.cwd.mkdir(parents=True, exist_ok=True)
            run = await CliRun.spawn(self.args, self.env, self.cwd)
        await run.send(stdin_text)
        following = await CliRun.spawn(self.args, self.env, self.cwd)
        if self.spare is not None:  # a prompt running alongside started one too: keep one
            await following.discard()
        else:
            self.spare = following
        return run

    async def close(self) -> None:
        """Kill the process waiting for a prompt (the agent's ``teardown``)."""
        spare, self.spare = self.spare, None
        if spare is not None:
            await spare.discard()
