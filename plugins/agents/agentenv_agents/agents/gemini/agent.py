"""Gemini CLI as an A2A agent: the real ``gemini`` CLI, run once per prompt.

Built on AgentEnv's A2A agent SDK. Each prompt runs ``gemini -p "" --output-format stream-json
--approval-mode yolo`` with the prompt on stdin, in the agent's work folder. The model is
reached only through the run's model gateway, which speaks the Gemini API:
``GOOGLE_GEMINI_BASE_URL`` is the gateway (``AGENTENV_MODEL_BASE_URL`` minus its ``/v1``: the
CLI adds ``/v1beta/models/...``) and ``GEMINI_API_KEY`` the per-run token; no provider key is
ever in this container.

Before each prompt, ``~/.gemini/settings.json`` is written (0600: it holds the envs' bearer
tokens): API-key auth, the envs' MCP servers (``/ext/mcp-config``) as ``httpUrl`` servers with
their headers, trusted (a headless CLI cannot ask), usage statistics and telemetry off, folder
trust off, and ``model.maxSessionTurns`` from ``max_turns``. A ``system_prompt`` becomes the
global ``~/.gemini/GEMINI.md``, which the CLI adds to its own system prompt; skills given through
``/ext/skill-config`` are written to ``~/.gemini/skills/<name>/``, where the CLI finds them.

Session: the first prompt of an A2A context starts a CLI session with a fresh ``--session-id``;
later prompts of that context ``--resume`` it, so the CLI sees the whole conversation. A session
is pinned only once a prompt succeeded in it (a CLI that failed before its first answer keeps
no session to resume).

Trajectory (format ``gemini-stream-json/1``): an ``agentenv.cli`` event (CLI, version, session,
the command line), then the CLI's own events (``init``, ``message``, ``tool_use``,
``tool_result``, ``error``, ``result``), with each run of streamed assistant deltas joined into
one ``message`` event. The reply is the assistant text after the last tool event; usage is the
``result`` event's token counts and one tool call per ``tool_use``. A ``result`` whose status is
not ``success``, a non-zero exit or an end without ``result`` fails the turn (``agent_error``)
with the CLI's error and last stderr lines; a cancelled prompt kills the process group.
"""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path
from typing import Any

from agentenv_protocol.agent import (
    AGENT_CONFIG_V1,
    MCP_CONFIG_V1,
    SKILL_CONFIG_V1,
    SNAPSHOT_V1,
    TRAJECTORY_V1,
    AgentIdentity,
    CliAgent,
    CliAgentConfig,
    TaskRequest,
    TaskResult,
    a2a_agent,
    cli_version,
    write_skills,
)

TRAJECTORY_FORMAT = "gemini-stream-json/1"
CLI = os.environ.get("GEMINI_CLI", "gemini")
HOME = Path.home() / ".gemini"
#: Variables that would point the CLI at another model or account: never passed on.
FOREIGN_ENV = ("GOOGLE_API_KEY", "GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_GENAI_USE_GCA",
               "GOOGLE_CLOUD_PROJECT", "GOOGLE_APPLICATION_CREDENTIALS")
#: No colours in its output, and no second Node process: the CLI relaunches itself to raise
#: Node's heap limit, which a headless prompt does not need and which costs ~0.35 s a start.
QUIET_ENV = {"NO_COLOR": "1", "GEMINI_CLI_NO_RELAUNCH": "true"}
#: The installed package's manifest (the Dockerfile installs the CLI there).
PACKAGE_JSON = Path("/opt/gemini/node_modules/@google/gemini-cli/package.json")


VERSION = cli_version([CLI, "--version"], PACKAGE_JSON)


def settings(request: TaskRequest[CliAgentConfig]) -> dict[str, Any]:
    """``~/.gemini/settings.json`` for one prompt: see the module docstring."""
    servers = {name: {"httpUrl": server.url, "headers": dict(server.headers), "trust": True}
               for name, server in request.mcp_servers.items()}
    model: dict[str, Any] = {}
    if request.config.max_turns:
        model["maxSessionTurns"] = request.config.max_turns
    return {"security": {"auth": {"selectedType": "gemini-api-key"},
                         "folderTrust": {"enabled": False}},
            "privacy": {"usageStatisticsEnabled": False},
            "telemetry": {"enabled": False},
            "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
            "model": model,
            "mcpServers": servers}


@a2a_agent(
    identity=AgentIdentity(name="gemini", version=VERSION,
                           description="Gemini CLI (headless) over its envs' MCP tools."),
    config=CliAgentConfig,
    extensions=(AGENT_CONFIG_V1, MCP_CONFIG_V1, TRAJECTORY_V1, SKILL_CONFIG_V1,
                SNAPSHOT_V1),
)
class GeminiAgent(CliAgent):
    trajectory_format = TRAJECTORY_FORMAT
    cli_name = "gemini"
    session_folders = (".gemini/tmp",)
    version = VERSION
    foreign_env = FOREIGN_ENV

    def prepare(self, request: TaskRequest[CliAgentConfig]) -> None:
        """The CLI's home for this prompt: settings, global context, skills."""
        HOME.mkdir(parents=True, exist_ok=True)
        path = HOME / "settings.json"
        path.write_text(json.dumps(settings(request)), encoding="utf-8")
        path.chmod(0o600)  # holds the envs' bearer tokens
        context = HOME / "GEMINI.md"
        if request.config.system_prompt:
            context.write_text(request.config.system_prompt, encoding="utf-8")
        else:
            context.unlink(missing_ok=True)
        write_skills(request.skills, HOME / "skills")

    async def run(self, request: TaskRequest[CliAgentConfig]) -> TaskResult:
        model = self.model_for(request)
        if model is None:
            return self.no_model()
        trajectory = request.trajectory
        known = self.sessions.get(request.context_id)
        session = known or str(uuid.uuid4())
        args = [CLI, "-p", "", "--output-format", "stream-json", "--approval-mode", "yolo",
                "--model", model, "--resume" if known else "--session-id", session]
        self.begin(request, args, session_id=session, resumed=known is not None)
        self.prepare(request)
        answer: list[str] = []  # assistant text since the last tool event: the reply
        pending: list[str] = []  # deltas not yet in the trajectory
        result: dict[str, Any] | None = None
        errors: list[str] = []
        try:
            async with await self.launch(args, request.text, {
                    **QUIET_ENV, "GOOGLE_GEMINI_BASE_URL": self.gateway_root,
                    "GEMINI_API_KEY": self.token}) as run:
                async for event in run.events():
                    kind = event.get("type")
                    if kind == "message" and event.get("role") == "assistant":
                        piece = str(event.get("content") or "")
                        answer.append(piece)
                        pending.append(piece)
                        continue
                    record_deltas(trajectory, pending)
                    trajectory.append(event)
                    if kind in ("tool_use", "tool_result"):
                        if kind == "tool_use":
                            request.usage.add_tool_call()
                        answer.clear()
                    elif kind == "error":
                        errors.append(str(event.get("message") or event))
                    elif kind == "result":
                        result = event
                        if event.get("status") == "success":  # the CLI saved the session
                            self.sessions[request.context_id] = session
                code = await run.wait()
        finally:
            record_deltas(trajectory, pending)
        text = "".join(answer)
        if result is None:
            return TaskResult.failure(
                f"gemini exited with code {code} without a result{run.stderr_tail()}",
                code="gemini.no_result")
        stats: dict[str, Any] = result["stats"] if isinstance(result.get("stats"), dict) \
            else {}
        request.usage.add_tokens(input_tokens=int(stats.get("input_tokens") or 0),
                                 output_tokens=int(stats.get("output_tokens") or 0))
        if result.get("status") != "success" or code != 0:
            error = result.get("error")
            why = (error.get("message") if isinstance(error, dict) else error) \
                or "; ".join(errors) or result.get("status") or "error"
            return TaskResult.failure(f"gemini failed ({why}; exit code {code})"
                                      f"{run.stderr_tail()}", code="gemini.failed")
        if not text.strip():
            return TaskResult.failure("gemini answered with no text", code="gemini.empty_answer")
        return TaskResult(text=text.strip())


def record_deltas(trajectory: Any, pending: list[str]) -> None:
    """Record the assistant text streamed since the last event as one ``message`` event."""
    if pending:
        trajectory.append({"type": "message", "role": "assistant", "content": "".join(pending),
                           "deltas": len(pending)})
        pending.clear()


if __name__ == "__main__":
    GeminiAgent().serve()
