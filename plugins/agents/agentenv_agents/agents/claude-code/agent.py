"""Claude Code as an A2A agent: the real ``claude`` CLI, run once per prompt.

Built on AgentEnv's A2A agent SDK. Each prompt runs ``claude -p --output-format stream-json
--verbose`` with the envs' MCP servers (``/ext/mcp-config``) in its ``--mcp-config`` (and
``--strict-mcp-config``: no other server), the prompt on stdin. The model is reached only
through the run's model gateway: ``ANTHROPIC_BASE_URL`` is the gateway (``AGENTENV_MODEL_BASE_URL``
minus its ``/v1``: the CLI adds ``/v1/messages``) and ``ANTHROPIC_API_KEY`` the per-run token;
no provider key is ever in this container.

Skills given through ``/ext/skill-config`` are written to ``~/.claude/skills/<name>/`` before
each prompt, where the CLI finds personal skills.

Session: the first prompt of an A2A context starts a CLI session with a fresh
``--session-id``; later prompts of that context ``--resume`` it, so the CLI sees the whole
conversation. A prompt that fails before the CLI started its session does not pin one.

Trajectory (format ``claude-code-stream-json/1``): an ``agentenv.cli`` event (CLI name, version,
session, the command line without the prompt), then every line the CLI printed, as the CLI's
own JSON event (a line that is not JSON is kept as ``{"type": "agentenv.unparsed"}``). The
reply is the CLI's ``result`` event; usage is its token counts, cost and the tool_use blocks of
its assistant messages. A CLI that exits non-zero or ends without a ``result`` fails the turn
(``agent_error``) with its last stderr lines; a cancelled prompt kills the CLI's process group.
"""

from __future__ import annotations

import json
import os
import tempfile
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

TRAJECTORY_FORMAT = "claude-code-stream-json/1"
CLI = os.environ.get("CLAUDE_CLI", "claude")
#: Where the CLI looks for personal skills (``~/.claude/skills/<name>/SKILL.md``).
SKILLS_DIR = Path.home() / ".claude" / "skills"
#: Variables that keep the CLI to the model gateway: no telemetry, update checks or error
#: reports (the container may reach nothing else), and MCP tools offered up front rather than
#: behind the CLI's tool search (a model, scripted or not, sees every env tool at once).
QUIET_ENV = {
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "ENABLE_TOOL_SEARCH": "false",
}


#: ``2.1.332``, from ``claude --version`` (``2.1.332 (Claude Code)``)
VERSION = cli_version([CLI, "--version"])


@a2a_agent(
    identity=AgentIdentity(name="claude-code", version=VERSION,
                           description="Claude Code (the claude CLI) over its envs' MCP tools."),
    config=CliAgentConfig,
    extensions=(AGENT_CONFIG_V1, MCP_CONFIG_V1, TRAJECTORY_V1, SKILL_CONFIG_V1,
                SNAPSHOT_V1),
)
class ClaudeCodeAgent(CliAgent):
    trajectory_format = TRAJECTORY_FORMAT
    cli_name = "claude"
    session_folders = (".claude/projects",)
    code_prefix = "claude_code"
    version = VERSION
    foreign_env = ("ANTHROPIC_AUTH_TOKEN",)

    def __init__(self) -> None:
        super().__init__()
        self.scratch = Path(tempfile.mkdtemp(prefix="claude-code-agent-"))

    def command(self, request: TaskRequest[CliAgentConfig], model: str,
                session: str, resume: bool) -> list[str]:
        config = request.config
        servers = {name: {"type": "http", "url": server.url, "headers": dict(server.headers)}
                   for name, server in request.mcp_servers.items()}
        mcp = self.scratch / f"mcp-{request.task_id}.json"
        mcp.write_text(json.dumps({"mcpServers": servers}), encoding="utf-8")
        mcp.chmod(0o600)  # holds the envs' bearer tokens
        args = [CLI, "-p", "--output-format", "stream-json", "--verbose",
                "--dangerously-skip-permissions", "--model", model,
                "--mcp-config", str(mcp), "--strict-mcp-config",
                "--resume" if resume else "--session-id", session]
        if config.system_prompt:
            args += ["--append-system-prompt", config.system_prompt]
        if config.max_turns:
            args += ["--max-turns", str(config.max_turns)]
        return args

    async def run(self, request: TaskRequest[CliAgentConfig]) -> TaskResult:
        model = self.model_for(request)
        if model is None:
            return self.no_model()
        trajectory = request.trajectory
        known = self.sessions.get(request.context_id)
        session = known or str(uuid.uuid4())
        args = self.command(request, model, session, resume=known is not None)
        self.begin(request, args, session_id=session, resumed=known is not None)
        write_skills(request.skills, SKILLS_DIR)
        result: dict[str, Any] | None = None
        try:
            async with await self.launch(args, request.text, {
                    **QUIET_ENV, "ANTHROPIC_BASE_URL": self.gateway_root,
                    "ANTHROPIC_API_KEY": self.token}) as run:
                async for event in run.events():
                    trajectory.append(event)
                    kind = event.get("type")
                    if kind == "system" and event.get("session_id"):
                        self.sessions[request.context_id] = str(event["session_id"])
                    elif kind == "assistant":
                        blocks = (event.get("message") or {}).get("content") or []
                        request.usage.add_tool_call(sum(
                            1 for b in blocks
                            if isinstance(b, dict) and b.get("type") == "tool_use"))
                    elif kind == "result":
                        result = event
                code = await run.wait()
        finally:
            (self.scratch / f"mcp-{request.task_id}.json").unlink(missing_ok=True)
        if result is None:
            return TaskResult.failure(
                f"claude exited with code {code} without a result{run.stderr_tail()}",
                code="claude_code.no_result")
        usage = result.get("usage") or {}
        request.usage.add_tokens(
            input_tokens=int(usage.get("input_tokens") or 0)
            + int(usage.get("cache_read_input_tokens") or 0)
            + int(usage.get("cache_creation_input_tokens") or 0),
            output_tokens=int(usage.get("output_tokens") or 0))
        if isinstance(result.get("total_cost_usd"), int | float):
            request.usage.add_cost(float(result["total_cost_usd"]))
        text = result.get("result")
        if result.get("is_error") or result.get("subtype") != "success" or code != 0:
            why = text or result.get("subtype") or "error"
            return TaskResult.failure(f"claude failed ({why}; exit code {code})"
                                      f"{run.stderr_tail()}", code="claude_code.failed")
        if not isinstance(text, str) or not text.strip():
            return TaskResult.failure("claude answered with no text",
                                      code="claude_code.empty_answer")
        return TaskResult(text=text)


if __name__ == "__main__":
    ClaudeCodeAgent().serve()
