"""Aider as an A2A agent: aider's own coder, run once per prompt in a process of its own.

Built on AgentEnv's A2A agent SDK. Each prompt gets its own ``python agent.py --episode``
process, the job on its stdin; the process is started one prompt ahead and imports aider and
litellm while it waits (:class:`~agentenv_protocol.agent.PrestartedRun`). It builds aider's
coder (``Coder.create``, the ``diff`` edit format: SEARCH/REPLACE blocks) in the agent's work
folder, without git, its model ``openai/<model>`` at ``AGENTENV_MODEL_BASE_URL`` with the
per-run token (no provider key is ever in this container), and prints what happened as JSON
lines.

What aider does headless, and what this adapter decides:

- every question aider asks (create a file, run a command, add its output) is answered yes: the
  agent runs in its own sandbox, and a headless run cannot answer;
- a shell command aider suggests (a ```bash block) is run in the work folder, and its output is
  sent back to the model at once, as aider does with lint and test errors (a *reflection*; at
  most ``max_turns`` of them per prompt). Aider alone would only add the output to the chat for
  the next prompt, so the model could never act on a tool's result within one prompt;
- the envs' MCP tools (``/ext/mcp-config``) are the SDK's ``mcp-call`` command
  (:mod:`agentenv_protocol.agent.mcp_call`), which the prompt tells the model about: aider has
  no MCP client;
- a ``system_prompt`` is a read-only file in the chat (aider's way for conventions);
- the session is aider's chat history file, one per A2A context, restored on the next prompt
  (and carried by a snapshot);
- aider's model-metadata download is skipped: its cache is filled from the price list litellm
  ships, so a sealed container waits on nothing;
- aider prints for a person; that goes to stderr, and stdout carries only the events.

Aider puts a fixed exchange in every request ("I am not sharing any files..." / "Ok."; one more
for the read-only file a ``system_prompt`` becomes), so a script for the scripted model counts
each such ``Ok.`` as an assistant turn.

Trajectory (format ``aider/1``): an ``agentenv.cli`` event, each shell command with its output
(``aider.shell``), aider's errors and warnings (``aider.error``), every message the prompt added
(``aider.message``), then ``aider.exit`` (reply, tokens sent and received, cost). The reply is
aider's last answer; an empty one fails the turn (``agent_error``) with aider's errors.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from agentenv_protocol.agent import (
    AGENT_CONFIG_V1,
    MCP_CONFIG_V1,
    SNAPSHOT_V1,
    TRAJECTORY_V1,
    AgentIdentity,
    CliAgentConfig,
    EpisodeAgent,
    TaskRequest,
    TaskResult,
    a2a_agent,
    package_version,
)

TRAJECTORY_FORMAT = "aider/1"
TOOLS_NOTE = (
    "\n\nThe tools of your environment are the `mcp-call` command, which you can run in a "
    "```bash block: `mcp-call list` lists them with their input schemas, and "
    "`mcp-call TOOL '<JSON arguments>'` calls one and prints its result; you will see the "
    "output.")
SESSIONS = Path.home() / ".aider-sessions"


@a2a_agent(
    identity=AgentIdentity(name="aider", version=package_version("aider-chat"),
                           description="Aider (edits and shell commands) with its envs' tools "
                                       "as the mcp-call command."),
    config=CliAgentConfig,
    extensions=(AGENT_CONFIG_V1, MCP_CONFIG_V1, SNAPSHOT_V1, TRAJECTORY_V1),
)
class AiderAgent(EpisodeAgent):
    trajectory_format = TRAJECTORY_FORMAT
    cli_name = "aider"
    code_prefix = "aider"
    version = package_version("aider-chat")
    turns_default = 3
    session_folders = (".aider-sessions",)

    async def run(self, request: TaskRequest[CliAgentConfig]) -> TaskResult:
        model = self.model_for(request)
        if model is None:
            return self.no_model()
        trajectory = request.trajectory
        SESSIONS.mkdir(parents=True, exist_ok=True)
        # a context loaded from a snapshot goes on with the history it was saved with
        history = Path(self.sessions.get(request.context_id)
                       or SESSIONS / f"{request.context_id}.md")
        job = {"message": request.text + (TOOLS_NOTE if request.mcp_servers else ""),
               "model": model, "base_url": self.base_url, "history": str(history),
               "resumed": history.exists(), "system_prompt": request.config.system_prompt,
               "max_reflections": self.max_turns(request),
               "cwd": str(self.workdir)}
        self.begin(request, self.process.args, model=model, resumed=job["resumed"])
        ended: dict[str, Any] | None = None
        errors: list[str] = []
        async with await self.start_episode(request, job) as run:
            async for event in run.events():
                trajectory.append(event)
                kind = event.get("type")
                if kind == "aider.shell":
                    request.usage.add_tool_call()
                elif kind == "aider.error" and event.get("level") == "error":
                    errors.append(str(event.get("message") or ""))
                elif kind == "aider.exit":
                    ended = event
            code = await run.wait()
        if history.exists():
            self.sessions[request.context_id] = str(history)
        if ended is None or code != 0:
            return self.ended_early(code, run)
        self.add_usage(request, ended, "tokens_sent", "tokens_received")
        reply = str(ended.get("reply") or "").strip()
        if not reply:
            why = "; ".join(e for e in errors if e) or "no answer"
            return TaskResult.failure(f"aider answered with no text: {why[:1000]}",
                                      code="aider.empty_answer")
        return TaskResult(text=reply)


#: Where the events go: the process's real stdout (aider's own printing goes to stderr).
EVENTS = sys.stdout


def emit(event: dict[str, Any]) -> None:
    EVENTS.write(json.dumps(event, default=str) + "\n")
    EVENTS.flush()


def fill_model_cache() -> None:
    """Aider's model metadata cache, from the price list litellm ships (aider would download
    it, and a fresh cache file is what it reads instead)."""
    from importlib.resources import files

    cache = Path.home() / ".aider" / "caches" / "model_prices_and_context_window.json"
    cache.parent.mkdir(parents=True, exist_ok=True)
    shipped = files("litellm").joinpath("model_prices_and_context_window_backup.json")
    cache.write_bytes(shipped.read_bytes())


def episode() -> int:
    """The prompt's process: one aider coder run of the job on stdin, JSON lines out. It
    imports aider and litellm (about 2 s) before it reads the job, so a process started ahead
    of its prompt (:class:`PrestartedRun`) has done that by the time the prompt comes."""
    global EVENTS
    EVENTS, sys.stdout = sys.stdout, sys.stderr
    import litellm  # noqa: F401  (aider loads it lazily, at the first model call)
    from aider.coders import Coder
    from aider.io import InputOutput
    from aider.models import Model

    job = json.load(sys.stdin)
    os.chdir(job["cwd"])
    fill_model_cache()
    os.environ["OPENAI_API_BASE"] = job["base_url"]
    os.environ["OPENAI_API_KEY"] = os.environ.get("AGENTENV_MODEL_TOKEN", "")

    class HeadlessIO(InputOutput):
        """Answers every question yes and reports errors and warnings as events."""

        def confirm_ask(self, question: str, default: str = "y", subject: Any = None,
                        explicit_yes_required: bool = False, group: Any = None,
                        allow_never: bool = False) -> bool:
            return True

        def tool_error(self, message: str = "", strip: bool = True) -> None:
            emit({"type": "aider.error", "level": "error", "message": message})
            super().tool_error(message, strip)

        def tool_warning(self, message: str = "", strip: bool = True) -> None:
            emit({"type": "aider.error", "level": "warning", "message": message})
            super().tool_warning(message, strip)

    io = HeadlessIO(yes=True, pretty=False, fancy_input=False, chat_history_file=job["history"],
                    input_history_file=os.devnull)
    model = Model(f"openai/{job['model']}")
    model.examples_as_sys_msg = True  # its examples in the system prompt, not as turns
    read_only = []
    if job.get("system_prompt"):
        conventions = Path.home() / ".aider-conventions.md"
        conventions.write_text(job["system_prompt"], encoding="utf-8")
        read_only.append(str(conventions))
    coder = Coder.create(main_model=model, io=io, edit_format="diff", use_git=False, fnames=[],
                         read_only_fnames=read_only, auto_commits=False, dirty_commits=False,
                         stream=False, suggest_shell_commands=True, map_tokens=0,
                         restore_chat_history=bool(job["resumed"]), auto_lint=False)
    coder.max_reflections = int(job["max_reflections"])
    before = len(coder.done_messages)
    run_commands = coder.handle_shell_commands

    def handle_shell_commands(commands: str, group: Any) -> str | None:
        output = run_commands(commands, group)
        emit({"type": "aider.shell", "commands": commands, "output": output})
        return output

    def run_shell_commands() -> str:
        """Run aider's suggested commands, and reflect their output to the model."""
        output = shell_commands()
        coder.shell_commands = []  # run once: a reflection's reply may suggest its own
        if output:
            coder.reflected_message = output
        return ""  # not also kept for the next prompt: the model has seen it

    shell_commands = coder.run_shell_commands
    coder.handle_shell_commands = handle_shell_commands  # type: ignore[method-assign]
    coder.run_shell_commands = run_shell_commands  # type: ignore[method-assign]
    reply = ""
    try:
        reply = coder.run(job["message"]) or ""
    except Exception as exc:  # aider reports model errors itself; anything else ends here
        emit({"type": "aider.error", "level": "error", "message": f"{type(exc).__name__}: {exc}"})
    for message in (coder.done_messages + coder.cur_messages)[before:]:
        emit({"type": "aider.message", "role": message.get("role"),
              "content": message.get("content")})
    emit({"type": "aider.exit", "reply": reply, "tokens_sent": coder.total_tokens_sent,
          "tokens_received": coder.total_tokens_received, "cost": coder.total_cost})
    return 0


if __name__ == "__main__":
    AiderAgent.main(episode)
