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
from pathlib import Path
from typing import Any

from agentenv_protocol.agent import (
    AGENT_CONFIG_V1,
    MCP_CONFIG_V1,
    SNAPSHOT_V1,
    TRAJECTORY_V1,
    AgentIdentity,
    CliAgent,
    CliAgentConfig,
    TaskRequest,
    TaskResult,
    a2a_agent,
    cli_version,
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


#: The installed package's manifest (the Dockerfile installs pi there).
PACKAGE_JSON = Path("/opt/pi/node_modules/@mariozechner/pi-coding-agent/package.json")


#: ``0.73.1``: without a terminal pi prints ``--version`` on stderr, which is read when the
#: manifest is not there
VERSION = cli_version([CLI, "--version"], PACKAGE_JSON)


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
    config=CliAgentConfig,
    extensions=(AGENT_CONFIG_V1, MCP_CONFIG_V1, TRAJECTORY_V1,
                SNAPSHOT_V1),
)
class PiAgent(CliAgent):
    trajectory_format = TRAJECTORY_FORMAT
    cli_name = "pi"
    session_folders = (".pi/sessions",)
    version = VERSION

    def __init__(self) -> None:
        super().__init__()
        self.home = Path.home() / ".pi"

    def command(self, request: TaskRequest[CliAgentConfig], model: str, session: Path,
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

    async def run(self, request: TaskRequest[CliAgentConfig]) -> TaskResult:
        model = self.model_for(request)
        if model is None:
            return self.no_model()
        trajectory = request.trajectory
        config = self.home / "agent" / "models.json"
        config.parent.mkdir(parents=True, exist_ok=True)
        config.write_text(json.dumps(models_config(self.base_url, model)), encoding="utf-8")
        servers = write_servers(request.mcp_servers, self.home / "mcp-servers.json")
        # a context loaded from a snapshot goes on in the session it was saved with
        session = Path(self.sessions.get(request.context_id)
                       or self.home / "sessions" / request.context_id)
        session.mkdir(parents=True, exist_ok=True)
        resumed = request.context_id in self.sessions
        args = self.command(request, model, session, resumed)
        self.begin(request, args, resumed=resumed)
        answer: str | None = None
        failure: str | None = None
        ended = False
        async with await self.launch(args, request.text, servers) as run:
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
        if ended:
            self.sessions[request.context_id] = str(session)
        if failure is not None or code != 0 or not ended:
            why = failure or f"exited with code {code} without ending its turn"
            return TaskResult.failure(f"pi failed: {why}{run.stderr_tail()}", code="pi.failed")
        if not answer or not answer.strip():
            return TaskResult.failure("pi answered with no text", code="pi.empty_answer")
        return TaskResult(text=answer.strip())


if __name__ == "__main__":
    PiAgent().serve()
