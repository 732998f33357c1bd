"""Pi as an A2A agent: the real ``pi`` coding agent, run once per prompt.

Built on AgentEnv's A2A agent SDK. Each prompt runs ``pi -p --mode json`` with the prompt on
stdin and pi's four tools (read, bash, edit, write) in the agent's work folder. The model is a
custom provider ``agentenv`` written to ``~/.pi/agent/models.json`` before each prompt: the run's
model gateway as an OpenAI Chat Completions endpoint, its key the variable holding the per-run
token, so no provider key is ever in this container. Pi has no MCP client (by design), so the
envs' MCP tools (``/ext/mcp-config``) are the SDK's ``mcp-call`` command, which an appended
system prompt tells the model about. Extensions, skills, prompt templates, themes, context
files and start-up network calls are all off.

Session: the first prompt of an A2A context starts a pi session in a folder of that context's;
later prompts ``--continue`` it, so pi sees the whole conversation.

Trajectory (format ``pi-json/1``): an ``agentenv.cli`` event (CLI, version, the command line),
then every line pi printed, as its own JSON event, streaming deltas left out
(``message_update``, ``tool_execution_update``: the messages they build are in
``message_end``). The reply is the text of the last assistant message once ``agent_end`` came;
usage is the assistant messages' token counts and one tool call per ``tool_execution_end``. An
assistant message that stopped on an error, a non-zero exit or an end without ``agent_end``
fails the turn (``agent_error``) with pi's error and last stderr lines; a cancelled prompt kills
the process group.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import attrs

from agentenv_protocol.agent import (
    AGENT_CONFIG_V1,
    MCP_CONFIG_V1,
    TRAJECTORY_V1,
    AgentConfig,
    AgentEnvAgent,
    AgentIdentity,
    CliRun,
    TaskRequest,
    TaskResult,
    a2a_agent,
)
from agentenv_protocol.agent.mcp_call import write_servers

TRAJECTORY_FORMAT = "pi-json/1"
CLI = os.environ.get("PI_CLI", "pi")
PROVIDER = "agentenv"
TOKEN_VARIABLE = "AGENTENV_MODEL_TOKEN"
#: Events that only stream what a later event carries whole.
STREAMING = {"message_update", "tool_execution_update"}
OFF = ["--no-extensions", "--no-skills", "--no-prompt-templates", "--no-themes",
       "--no-context-files", "--offline"]
TOOLS_NOTE = ("The tools of your environment are the `mcp-call` command, run with your bash "
              "tool: `mcp-call list` lists them with their input schemas, and "
              "`mcp-call TOOL '<JSON arguments>'` calls one and prints its result.")


@attrs.define
class PiConfig(AgentConfig):
    model: str | None = None
    system_prompt: str | None = None


#: The installed package's manifest (the Dockerfile installs pi there).
PACKAGE_JSON = Path("/opt/pi/node_modules/@mariozechner/pi-coding-agent/package.json")


def cli_version() -> str:
    """``0.73.1`` from the installed package's manifest (read at once: the agent's start waits
    for it), else from ``pi --version`` (``unknown`` when it does not answer). Without a
    terminal pi keeps stdout for its JSON and prints the version on stderr."""
    try:
        return str(json.loads(PACKAGE_JSON.read_text(encoding="utf-8"))["version"])
    except (OSError, ValueError, KeyError):
        pass
    try:
        done = subprocess.run([CLI, "--version"], capture_output=True, text=True, timeout=60,
                              check=False, stdin=subprocess.DEVNULL)
    except OSError:
        return "unknown"
    out = (done.stdout + done.stderr).strip()
    return out.split()[-1] if out else "unknown"


VERSION = cli_version()


def models_config(base_url: str, model: str) -> dict[str, Any]:
    """``models.json``: the gateway as pi's only custom provider, serving ``model``."""
    return {"providers": {PROVIDER: {
        "baseUrl": base_url, "api": "openai-completions", "apiKey": TOKEN_VARIABLE,
        "compat": {"supportsDeveloperRole": False, "supportsReasoningEffort": False},
        "models": [{"id": model, "name": model, "reasoning": False, "input": ["text"]}],
    }}}


@a2a_agent(
    identity=AgentIdentity(name="pi", version=VERSION,
                           description="Pi (pi -p) with its envs' tools as mcp-call."),
    config=PiConfig,
    extensions=(AGENT_CONFIG_V1, MCP_CONFIG_V1, TRAJECTORY_V1),
)
class PiAgent(AgentEnvAgent):
    def __init__(self) -> None:
        self.base_url = os.environ.get("AGENTENV_MODEL_BASE_URL", "").rstrip("/")
        self.default_model = os.environ.get("AGENTENV_MODEL_NAME") or None
        self.workdir = Path(os.environ.get("AGENTENV_WORKDIR") or Path.home() / "work")
        self.home = Path.home() / ".pi"
        self.sessions: set[str] = set()  # A2A contexts with a pi session to continue

    def command(self, request: TaskRequest[PiConfig], model: str, session: Path,
                resumed: bool) -> list[str]:
        args = [CLI, "-p", "--mode", "json", "--provider", PROVIDER, "--model", model,
                "--session-dir", str(session), *OFF]
        if resumed:
            args.append("--continue")
        if request.config.system_prompt:
            args += ["--append-system-prompt", request.config.system_prompt]
        if request.mcp_servers:
            args += ["--append-system-prompt", TOOLS_NOTE]
        return args

    async def run(self, request: TaskRequest[PiConfig]) -> TaskResult:
        model = request.config.model or self.default_model
        if not self.base_url or not model:
            return TaskResult.failure("no model endpoint or model name is configured",
                                      code="pi.no_model")
        trajectory = request.trajectory
        trajectory.set_format(TRAJECTORY_FORMAT)
        config = self.home / "agent" / "models.json"
        config.parent.mkdir(parents=True, exist_ok=True)
        config.write_text(json.dumps(models_config(self.base_url, model)), encoding="utf-8")
        servers = write_servers(request.mcp_servers, self.home / "mcp-servers.json")
        session = self.home / "sessions" / request.context_id
        session.mkdir(parents=True, exist_ok=True)
        resumed = request.context_id in self.sessions
        args = self.command(request, model, session, resumed)
        trajectory.append({"type": "agentenv.cli", "cli": "pi", "version": VERSION,
                           "resumed": resumed, "argv": args})
        self.workdir.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, **servers}
        env.pop("A2A_TOKEN", None)
        run = await CliRun.start(args, request.text, env, self.workdir)
        answer: str | None = None
        failure: str | None = None
        ended = False
        try:
            async for event in run.events():
                kind = event.get("type")
                if kind in STREAMING:
                    continue
                trajectory.append(event)
                message = event.get("message") if isinstance(event.get("message"), dict) \
                    else {}
                if kind == "message_end" and message.get("role") == "assistant":
                    usage = message.get("usage") or {}
                    request.usage.add_tokens(input_tokens=int(usage.get("input") or 0),
                                             output_tokens=int(usage.get("output") or 0))
                    if message.get("stopReason") in ("error", "aborted"):
                        failure = str(message.get("errorMessage") or message["stopReason"])
                    texts = [str(b.get("text") or "") for b in message.get("content") or ()
                             if isinstance(b, dict) and b.get("type") == "text"]
                    answer = "".join(texts) if texts else answer
                elif kind == "tool_execution_end":
                    request.usage.add_tool_call()
                elif kind == "agent_end":
                    ended = True
            code = await run.wait()
        except BaseException:  # cancelled (the prompt's timeout, tasks/cancel): stop pi
            run.kill()
            raise
        if ended:
            self.sessions.add(request.context_id)
        if failure is not None or code != 0 or not ended:
            why = failure or f"exited with code {code} without ending its turn"
            return TaskResult.failure(f"pi failed: {why}{run.stderr_tail()}", code="pi.failed")
        if not answer or not answer.strip():
            return TaskResult.failure("pi answered with no text", code="pi.empty_answer")
        return TaskResult(text=answer.strip())


if __name__ == "__main__":
    PiAgent().serve()
