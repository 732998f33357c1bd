"""The kit a command-line agent is built from: what the shipped claude-code, codex, gemini,
opencode and pi agents share around their CLI, and mini-swe-agent and aider around their agent
loop, so each one's folder holds only what is its own (a Dockerfile, ``agent.toml``, and an
adapter: the command line, the CLI's config, reading its events).

- :class:`CliAgentConfig`: the agent-config/v1 fields they all take (``model``,
  ``system_prompt``, ``max_turns``); an agent extends it with its own.
- :class:`CliAgent`: the base class. It reads the run's model endpoint and work folder once
  (``AGENTENV_MODEL_BASE_URL``, ``AGENTENV_MODEL_TOKEN``, ``AGENTENV_MODEL_NAME``,
  ``AGENTENV_WORKDIR``), keeps the A2A context -> CLI session map, and gives ``run`` its
  preamble: :meth:`~CliAgent.model_for` (``None``: answer :meth:`~CliAgent.no_model`),
  :meth:`~CliAgent.begin` (the trajectory's format and its ``agentenv.cli`` event) and
  :meth:`~CliAgent.launch` (the CLI started in the work folder, the prompt on stdin, without the
  variables it must never see). The :class:`~.cli_process.CliRun` it returns is an async
  context manager that kills the CLI's process group when the prompt is cancelled.
- :class:`EpisodeAgent`: a :class:`CliAgent` whose "CLI" is a Python agent loop (aider,
  mini-swe-agent, OpenHands) run by the agent's own file as ``agent.py --episode``: one process
  per prompt, the job as JSON on its stdin, started a prompt ahead so its imports are done when
  the prompt comes (:class:`~.cli_process.PrestartedRun`).
- sessions in snapshots: a CLI keeps a context's conversation in its own files, which
  snapshot/v1 carries when the subclass names their folders (:attr:`CliAgent.session_folders`):
  a save packs them with the context's session id, a load unpacks them and maps the loaded
  context to that session, so its next prompt resumes it.
- :func:`cli_version`: the CLI's version, from its package manifest when it has one (read at
  once: the agent's card waits for it), else from ``--version``; :func:`package_version`: a
  Python distribution's.
"""

from __future__ import annotations

import asyncio
import inspect
import io
import json
import os
import re
import subprocess
import sys
import tarfile
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Any, ClassVar

import attrs

from .cli_process import CliRun, PrestartedRun
from .framework import AgentEnvAgent
from .models import AgentConfig, TaskRequest, TaskResult

_VERSION = re.compile(r"\d+\.\d+[\w.+-]*")


@attrs.define
class CliAgentConfig(AgentConfig):
    """What every CLI agent takes through agent-config/v1."""

    model: str | None = None
    system_prompt: str | None = None
    max_turns: int | None = None


def cli_version(command: list[str], manifest: Path | None = None) -> str:
    """``"version"`` of the package manifest (``package.json``) if readable, else the first
    version number ``command`` (``[cli, "--version"]``) prints on stdout or stderr
    (``codex-cli 0.171.0``, ``2.1.332 (Claude Code)``); ``unknown`` when neither answers."""
    if manifest is not None:
        try:
            return str(json.loads(manifest.read_text(encoding="utf-8"))["version"])
        except (OSError, ValueError, KeyError):
            pass
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=60,
                              check=False, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    found = _VERSION.search(done.stdout) or _VERSION.search(done.stderr)
    return found.group(0) if found else "unknown"


def package_version(distribution: str) -> str:
    """The installed version of a Python distribution (``aider-chat``), else ``unknown``."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(distribution)
    except PackageNotFoundError:
        return "unknown"


def pack_session(home: Path, folders: tuple[str, ...], session: str) -> bytes:
    """``session.json`` (``{"session": id}``) and every regular file under ``home/<folder>``
    as ``home/<folder>/...``, in an uncompressed tar (links and devices left out)."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        meta = json.dumps({"session": session}).encode()
        info = tarfile.TarInfo("session.json")
        info.size = len(meta)
        tar.addfile(info, io.BytesIO(meta))
        for folder in folders:
            root = home / folder
            if not root.is_dir():
                continue
            for path in sorted(root.rglob("*")):
                if path.is_symlink() or not (path.is_file() or path.is_dir()):
                    continue
                tar.add(path, arcname=f"home/{path.relative_to(home).as_posix()}",
                        recursive=False)
    return out.getvalue()


def unpack_session(data: bytes, home: Path, folders: tuple[str, ...]) -> str:
    """Check a :func:`pack_session` tar whole (every member a plain file or folder inside one
    of ``folders``), then extract it under ``home``; the session id it names."""
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
            members = tar.getmembers()
            meta = next((m for m in members if m.name == "session.json" and m.isfile()), None)
            handle = tar.extractfile(meta) if meta is not None else None
            session = json.loads(handle.read()).get("session") if handle is not None else None
            if not isinstance(session, str) or not session:
                raise ValueError("it names no session (session.json)")
            files = [m for m in members if m is not meta]
            for member in files:
                name = PurePosixPath(member.name)
                inside = name.parts[:1] == ("home",) and ".." not in name.parts and any(
                    name.parts[1:1 + len(PurePosixPath(f).parts)] == PurePosixPath(f).parts
                    for f in folders)
                if name.is_absolute() or not inside or not (member.isfile() or member.isdir()):
                    raise ValueError(f"it holds {member.name!r}, which is not a plain file or "
                                     "folder in the CLI's session folders")
            for member in files:
                member.name = member.name.removeprefix("home/")
            if hasattr(tarfile, "data_filter"):  # Python 3.11.4+: the stdlib checks as well
                tar.extractall(home, members=files, filter="data")
            else:
                tar.extractall(home, members=files)  # every member was checked above
    except (tarfile.TarError, json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"it is not a saved session: {exc}") from None
    return session


class CliAgent(AgentEnvAgent):
    """Base class of an agent that runs a command-line agent once per prompt (see the module
    docstring). A subclass sets the class attributes and writes ``run``."""

    #: the trajectory format its events are recorded in (``gemini-stream-json/1``)
    trajectory_format: ClassVar[str] = "cli-events/1"
    #: the CLI's name in the ``agentenv.cli`` event
    cli_name: ClassVar[str] = "cli"
    #: the CLI's version, for the card and the ``agentenv.cli`` event
    version: ClassVar[str] = "unknown"
    #: the prefix of its error codes (``claude_code``), when not :attr:`cli_name`
    code_prefix: ClassVar[str] = ""
    #: variables never passed to the CLI: the agent's own A2A token, and whatever would point
    #: the CLI at another model or account
    foreign_env: ClassVar[tuple[str, ...]] = ()
    #: folders under the home folder where the CLI keeps its sessions (``.claude/projects``):
    #: a snapshot carries them; none, and a snapshot carries the events only
    session_folders: ClassVar[tuple[str, ...]] = ()

    def __init__(self) -> None:
        #: the run's model gateway as an OpenAI client takes it (ending in ``/v1``)
        self.base_url = os.environ.get("AGENTENV_MODEL_BASE_URL", "").rstrip("/")
        #: the same without ``/v1``, as Anthropic and Gemini clients take it
        self.gateway_root = self.base_url.removesuffix("/v1")
        self.token = os.environ.get("AGENTENV_MODEL_TOKEN", "")
        self.default_model = os.environ.get("AGENTENV_MODEL_NAME") or None
        self.workdir = Path(os.environ.get("AGENTENV_WORKDIR") or Path.home() / "work")
        #: A2A context id -> the CLI's session in it, once a prompt in it succeeded
        self.sessions: dict[str, str] = {}

    def model_for(self, request: TaskRequest[Any]) -> str | None:
        """The model this prompt asks for (the config's, else the deployment's), or None when
        there is no model or no gateway to ask."""
        model = getattr(request.config, "model", None) or self.default_model
        return model if self.base_url and model else None

    def no_model(self) -> TaskResult:
        return TaskResult.failure("no model endpoint or model name is configured",
                                  code=f"{self.code_prefix or self.cli_name}.no_model")

    def begin(self, request: TaskRequest[Any], argv: list[str], **fields: Any) -> None:
        """Start the prompt's trajectory: its format, then the ``agentenv.cli`` event (the CLI,
        its version, the command line and ``fields``: session, resumed...)."""
        request.trajectory.set_format(self.trajectory_format)
        request.trajectory.append({"type": "agentenv.cli", "cli": self.cli_name,
                                   "version": self.version, **fields, "argv": argv})

    def cli_env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        """This process's environment plus ``extra``, minus ``A2A_TOKEN`` and
        :attr:`foreign_env`."""
        env = {**os.environ, **(extra or {})}
        for name in ("A2A_TOKEN", *self.foreign_env):
            env.pop(name, None)
        return env

    async def save_session(self, context_id: str) -> bytes | None:
        """The CLI's session folders and the context's session id, as a tar (``session.json``
        and ``home/<folder>/...``), when the context has a session and the CLI names them."""
        session = self.sessions.get(context_id)
        if session is None or not self.session_folders:
            return None
        return await asyncio.to_thread(pack_session, Path.home(), self.session_folders,
                                       session)

    async def load_session(self, context_id: str, data: bytes) -> None:
        """Unpack a saved session's folders into the home folder and map ``context_id`` to
        its session: the context's next prompt resumes it."""
        if not self.session_folders:
            raise ValueError(f"{self.cli_name} keeps no session files a snapshot carries")
        self.sessions[context_id] = await asyncio.to_thread(
            unpack_session, data, Path.home(), self.session_folders)

    async def launch(self, argv: list[str], stdin_text: str,
                     extra_env: dict[str, str] | None = None) -> CliRun:
        """Start the CLI in the work folder with ``stdin_text`` as its input."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        return await CliRun.start(argv, stdin_text, self.cli_env(extra_env), self.workdir)


class EpisodeAgent(CliAgent):
    """A :class:`CliAgent` around a Python agent loop that runs in a process of its own per
    prompt: the subclass's file run as ``python agent.py --episode``, which imports the loop's
    package (seconds), then reads the job (JSON) on stdin and prints events as JSON lines.

    The process is started one prompt ahead (in :meth:`setup`, then by each prompt for the
    next), so the prompt waits on none of those imports. The envs' MCP tools are written where
    the SDK's ``mcp-call`` command reads them (the path is in the process's environment) for a
    loop that has no MCP client of its own. A subclass writes ``run`` (the job in, events to
    the trajectory, the result out) and the ``episode`` function, and ends its file with
    ``Agent.main(episode)``.
    """

    #: turns (steps, reflections) a prompt may take when neither it nor
    #: ``AGENTENV_MAX_TURNS`` says
    turns_default: ClassVar[int] = 30

    def __init__(self) -> None:
        from .mcp_call import write_servers

        super().__init__()
        self.default_max_turns = int(os.environ.get("AGENTENV_MAX_TURNS") or self.turns_default)
        self.servers_file = Path.home() / ".agentenv-mcp-servers.json"
        script = Path(inspect.getfile(type(self))).resolve()
        #: the next prompt's process, started (and done importing) ahead of it
        self.process = PrestartedRun([sys.executable, str(script), "--episode"],
                                     self.cli_env(write_servers({}, self.servers_file)),
                                     self.workdir)

    async def setup(self) -> None:
        await self.process.start()

    async def teardown(self) -> None:
        await self.process.close()

    def max_turns(self, request: TaskRequest[Any]) -> int:
        return getattr(request.config, "max_turns", None) or self.default_max_turns

    async def start_episode(self, request: TaskRequest[Any], job: dict[str, Any]) -> CliRun:
        """The prompt's process, given ``job``, with the request's MCP servers where
        ``mcp-call`` reads them. Use it as ``async with await self.start_episode(...)``."""
        from .mcp_call import write_servers

        write_servers(request.mcp_servers, self.servers_file)
        return await self.process.take(json.dumps(job))

    def ended_early(self, code: int | None, run: CliRun) -> TaskResult:
        """The failure of an episode process that ended before its exit event, or with a
        status other than 0, with its last stderr lines."""
        return TaskResult.failure(f"{self.cli_name} exited with code {code} before it finished"
                                  f"{run.stderr_tail()}",
                                  code=f"{self.code_prefix or self.cli_name}.failed")

    @staticmethod
    def add_usage(request: TaskRequest[Any], ended: dict[str, Any], input_key: str,
                  output_key: str) -> None:
        """The exit event's token counts (under its own keys) and its ``cost``, if any."""
        request.usage.add_tokens(input_tokens=int(ended.get(input_key) or 0),
                                 output_tokens=int(ended.get(output_key) or 0))
        if isinstance(ended.get("cost"), int | float) and ended["cost"]:
            request.usage.add_cost(float(ended["cost"]))

    @classmethod
    def main(cls, episode: Callable[[], int]) -> None:
        """The agent file's entry point: ``--episode`` runs one prompt's process, anything
        else serves the agent.

        The episode process ends with ``os._exit`` once its output is flushed: the prompt's
        answer waits for the process to end, and an interpreter's orderly shutdown after an
        agent loop (its SDK's exit hooks and worker threads) took about 2 s of every OpenHands
        prompt. Whatever the loop must keep is written before ``episode`` returns."""
        if sys.argv[1:] == ["--episode"]:
            code = episode()
            for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
                if stream is not None:
                    stream.flush()
            os._exit(code)
        cls().serve()
