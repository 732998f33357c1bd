"""Codex as an A2A agent: the real ``codex`` CLI, run once per prompt (``codex exec --json``).

Built on AgentEnv's A2A agent SDK. Before each prompt the agent writes ``$CODEX_HOME/config.toml``:
the model provider ``agentenv``, an OpenAI Responses provider (``wire_api = "responses"``) whose
``base_url`` is the run's model gateway (``AGENTENV_MODEL_BASE_URL``) and whose key is read from
``AGENTENV_MODEL_TOKEN`` (the per-run token; no provider key is ever in this container), and
the envs' MCP servers (``/ext/mcp-config``) as streamable-HTTP ``[mcp_servers.<name>]`` with
their headers. The prompt goes on stdin. A system prompt becomes ``developer_instructions``.

Session: the first prompt of an A2A context starts a Codex thread; later prompts of that
context run ``codex exec resume <thread id>``, so the CLI sees the whole conversation. The
thread id is the one the CLI reports in its ``thread.started`` event.

Trajectory (format ``codex-exec-json/1``): an ``agentenv.cli`` event (CLI name, version, thread,
the command line without the prompt), then every JSON line the CLI printed, as the CLI's own
event (a line that is not JSON is kept as ``{"type": "agentenv.unparsed"}``). The reply is the
last ``agent_message`` item; usage is the ``turn.completed`` token counts (minus the thread's
earlier prompts: a resumed thread reports its running total) and the completed
``mcp_tool_call``/``command_execution`` items. A ``turn.failed``, a non-zero exit or a run
without a completed turn (then the last ``error`` event says why) fails the prompt
(``agent_error``) with the CLI's error and its last stderr lines; a cancelled prompt kills the
CLI's process group.
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

TRAJECTORY_FORMAT = "codex-exec-json/1"
CLI = os.environ.get("CODEX_CLI", "codex")
PROVIDER = "agentenv"
TOKEN_VARIABLE = "AGENTENV_MODEL_TOKEN"
#: Item types that are the agent acting on the world (counted as tool calls).
TOOL_ITEMS = frozenset({"mcp_tool_call", "command_execution", "file_change", "web_search"})


#: ``0.171.0``, from ``codex --version`` (``codex-cli 0.171.0``)
VERSION = cli_version([CLI, "--version"])


def toml_string(value: str) -> str:
    """A TOML basic string (JSON's string escapes are all valid TOML)."""
    return json.dumps(value)


def codex_config(base_url: str, servers: dict[str, Any]) -> str:
    """``config.toml``: the gateway as the only model provider, the envs as MCP servers, and
    nothing the CLI would fetch from elsewhere (update checks, analytics, the curated plugins
    from GitHub, apps): where the gateway is the only reachable host, each of those costs seconds
    of a failing connection per prompt."""
    lines = [
        f"model_provider = {toml_string(PROVIDER)}",
        "check_for_update_on_startup = false",
        "",
        "[analytics]",
        "enabled = false",
        "",
        "[features]",
        "plugins = false",
        "apps = false",
        "in_app_updates = false",
        "",
        f"[model_providers.{PROVIDER}]",
        f"name = {toml_string('AgentEnv model gateway')}",
        f"base_url = {toml_string(base_url)}",
        f"env_key = {toml_string(TOKEN_VARIABLE)}",
        f"wire_api = {toml_string('responses')}",
    ]
    for name, server in servers.items():
        headers = ", ".join(f"{toml_string(k)} = {toml_string(v)}"
                            for k, v in dict(server.headers).items())
        lines += ["", f"[mcp_servers.{toml_string(name)}]", f"url = {toml_string(server.url)}",
                  f"http_headers = {{ {headers} }}"]
    return "\n".join(lines) + "\n"


@a2a_agent(
    identity=AgentIdentity(name="codex", version=VERSION,
                           description="Codex (codex exec) over its envs' MCP tools."),
    config=CliAgentConfig,
    extensions=(AGENT_CONFIG_V1, MCP_CONFIG_V1, TRAJECTORY_V1,
                SNAPSHOT_V1),
)
class CodexAgent(CliAgent):
    trajectory_format = TRAJECTORY_FORMAT
    cli_name = "codex"
    session_folders = (".codex/sessions",)
    version = VERSION
    foreign_env = ("OPENAI_API_KEY",)

    def __init__(self) -> None:
        super().__init__()
        self.home = Path(os.environ.get("CODEX_HOME") or Path.home() / ".codex")
        #: Thread id -> its (input, output) token totals so far: a resumed thread's
        #: ``turn.completed`` counts the whole thread, the prompt's usage is the difference.
        self.totals: dict[str, tuple[int, int]] = {}

    def command(self, request: TaskRequest[CliAgentConfig], model: str,
                thread: str | None) -> list[str]:
        args = [CLI, "exec"]
        if thread is not None:
            args.append("resume")
        args += ["--json", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox",
                 "-m", model]
        if request.config.system_prompt:
            args += ["-c", f"developer_instructions={toml_string(request.config.system_prompt)}"]
        if thread is not None:
            args.append(thread)
        return [*args, "-"]

    async def run(self, request: TaskRequest[CliAgentConfig]) -> TaskResult:
        model = self.model_for(request)
        if model is None:
            return self.no_model()
        trajectory = request.trajectory
        self.home.mkdir(parents=True, exist_ok=True)
        config = self.home / "config.toml"
        config.write_text(codex_config(self.base_url, dict(request.mcp_servers)),
                          encoding="utf-8")
        config.chmod(0o600)  # holds the envs' bearer tokens
        thread = self.sessions.get(request.context_id)  # the Codex thread
        args = self.command(request, model, thread)
        self.begin(request, args, thread_id=thread, resumed=thread is not None)
        answer: str | None = None
        failure: str | None = None
        last_error: str | None = None  # error events can be retries the turn survives
        completed = False
        async with await self.launch(args, request.text, {
                "CODEX_HOME": str(self.home), TOKEN_VARIABLE: self.token}) as run:
            async for event in run.events():
                trajectory.append(event)
                kind = event.get("type")
                item = event.get("item") if isinstance(event.get("item"), dict) else {}
                if kind == "thread.started" and event.get("thread_id"):
                    self.sessions[request.context_id] = str(event["thread_id"])
                elif kind == "item.completed" and item.get("type") == "agent_message":
                    answer = str(item.get("text") or "")
                elif kind == "item.completed" and item.get("type") in TOOL_ITEMS:
                    request.usage.add_tool_call()
                elif kind == "turn.completed":
                    completed = True
                    usage = event.get("usage") or {}
                    now = (int(usage.get("input_tokens") or 0),
                           int(usage.get("output_tokens") or 0))
                    key = self.sessions.get(request.context_id, "")
                    before = self.totals.get(key, (0, 0)) if thread is not None else (0, 0)
                    self.totals[key] = now
                    request.usage.add_tokens(input_tokens=max(now[0] - before[0], 0),
                                             output_tokens=max(now[1] - before[1], 0))
                elif kind == "turn.failed":
                    failure = str((event.get("error") or {}).get("message") or event)
                elif kind == "error":
                    last_error = str(event.get("message") or event)
            code = await run.wait()
        if failure is not None or code != 0 or not completed:
            why = failure or last_error or f"exited with code {code} without a completed turn"
            return TaskResult.failure(f"codex failed: {why}{run.stderr_tail()}",
                                      code="codex.failed")
        if not answer or not answer.strip():
            return TaskResult.failure("codex answered with no text", code="codex.empty_answer")
        return TaskResult(text=answer)


if __name__ == "__main__":
    CodexAgent().serve()
