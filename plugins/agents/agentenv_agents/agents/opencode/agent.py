"""OpenCode as an A2A agent: the real ``opencode`` CLI, run once per prompt.

Built on AgentEnv's A2A agent SDK. Each prompt runs ``opencode run --format json --pure --auto``
with the prompt on stdin, in the agent's work folder. The model is a custom provider
``agentenv`` (the OpenAI-compatible provider the CLI bundles, so nothing is installed at run
time): the run's model gateway (``AGENTENV_MODEL_BASE_URL``) keyed with the per-run token, so no
provider key is ever in this container.

Before each prompt, ``~/.config/opencode/opencode.json`` is written (0600: it holds the envs'
bearer tokens): the provider, the envs' MCP servers (``/ext/mcp-config``) as ``remote`` servers
with their headers, no auto-update and no sharing, and ``max_turns`` as the build agent's
``steps``. A ``system_prompt`` is an ``instructions`` file, which the CLI adds to its own system
prompt; skills given through ``/ext/skill-config`` are written to
``~/.config/opencode/skills/<name>/``, where the CLI finds them. ``--title`` is always given, so
the CLI does not spend a model call naming the session; ``--pure`` loads no external plugins;
``--auto`` approves the CLI's own permission asks (a headless run cannot answer them).

Session: the first prompt of an A2A context starts a CLI session; later prompts of that context
continue it (``--session <id>``, the id from the CLI's events), once a prompt in it succeeded.

Trajectory (format ``opencode-events/1``): an ``agentenv.cli`` event (CLI, version, session, the
command line), then the CLI's own JSON events (``step_start``, ``text``, ``tool_use``,
``step_finish``, ``error``). The reply is the text after the last tool call; usage is each
``step_finish``'s tokens and cost and one tool call per ``tool_use``. An ``error`` event, a
non-zero exit or an end without a finished step fails the turn (``agent_error``) with the CLI's
error and last stderr lines; a cancelled prompt kills the process group.
"""

from __future__ import annotations

import json
import os
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

TRAJECTORY_FORMAT = "opencode-events/1"
CLI = os.environ.get("OPENCODE_CLI", "opencode")
PROVIDER = "agentenv"
CONFIG_DIR = Path.home() / ".config" / "opencode"
#: Variables that would point the CLI at another model, config or account: never passed on.
FOREIGN_ENV = ("OPENCODE_CONFIG", "OPENCODE_CONFIG_CONTENT", "OPENAI_API_KEY",
               "ANTHROPIC_API_KEY")


VERSION = cli_version([CLI, "--version"])


def config(request: TaskRequest[CliAgentConfig], base_url: str, model: str,
           instructions: Path | None) -> dict[str, Any]:
    """``opencode.json`` for one prompt: see the module docstring."""
    servers = {name: {"type": "remote", "url": server.url, "headers": dict(server.headers),
                      "enabled": True}
               for name, server in request.mcp_servers.items()}
    document: dict[str, Any] = {
        "$schema": "https://opencode.ai/config.json",
        "autoupdate": False, "share": "disabled",
        "provider": {PROVIDER: {
            "npm": "@ai-sdk/openai-compatible", "name": "AgentEnv model gateway",
            "options": {"baseURL": base_url, "apiKey": "{env:AGENTENV_MODEL_TOKEN}"},
            "models": {model: {"name": model}}}},
        "model": f"{PROVIDER}/{model}",
        "mcp": servers,
    }
    if instructions is not None:
        document["instructions"] = [str(instructions)]
    if request.config.max_turns:
        document["agent"] = {"build": {"steps": request.config.max_turns}}
    return document


@a2a_agent(
    identity=AgentIdentity(name="opencode", version=VERSION,
                           description="OpenCode (opencode run) over its envs' MCP tools."),
    config=CliAgentConfig,
    extensions=(AGENT_CONFIG_V1, MCP_CONFIG_V1, TRAJECTORY_V1, SKILL_CONFIG_V1,
                SNAPSHOT_V1),
)
class OpenCodeAgent(CliAgent):
    trajectory_format = TRAJECTORY_FORMAT
    cli_name = "opencode"
    session_folders = (".local/share/opencode",)
    version = VERSION
    foreign_env = FOREIGN_ENV

    def prepare(self, request: TaskRequest[CliAgentConfig], model: str) -> None:
        """The CLI's config folder for this prompt: config, instructions, skills."""
        CONFIG_DIR.mkdir(parents=True, exist_ok=True)
        instructions: Path | None = CONFIG_DIR / "agentenv-instructions.md"
        if request.config.system_prompt:
            instructions.write_text(request.config.system_prompt, encoding="utf-8")
        else:
            instructions.unlink(missing_ok=True)
            instructions = None
        path = CONFIG_DIR / "opencode.json"
        path.write_text(json.dumps(config(request, self.base_url, model, instructions)),
                        encoding="utf-8")
        path.chmod(0o600)  # holds the envs' bearer tokens
        write_skills(request.skills, CONFIG_DIR / "skills")

    async def run(self, request: TaskRequest[CliAgentConfig]) -> TaskResult:
        model = self.model_for(request)
        if model is None:
            return self.no_model()
        trajectory = request.trajectory
        known = self.sessions.get(request.context_id)
        args = [CLI, "run", "--format", "json", "--pure", "--auto", "--title", "agentenv",
                "--model", f"{PROVIDER}/{model}"]
        if known:
            args += ["--session", known]
        self.begin(request, args, session_id=known, resumed=known is not None)
        self.prepare(request, model)
        answer: list[str] = []  # text since the last tool call: the reply
        errors: list[str] = []
        session: str | None = None
        finished = False
        async with await self.launch(args, request.text) as run:
            async for event in run.events():
                trajectory.append(event)
                kind = event.get("type")
                part = event.get("part") if isinstance(event.get("part"), dict) else {}
                session = str(event.get("sessionID") or session or "") or None
                if kind == "text":
                    answer.append(str(part.get("text") or ""))
                elif kind == "tool_use":
                    request.usage.add_tool_call()
                    answer.clear()
                elif kind == "step_finish":
                    tokens = part.get("tokens") if isinstance(part.get("tokens"), dict) else {}
                    cache = tokens.get("cache") if isinstance(tokens.get("cache"), dict) else {}
                    request.usage.add_tokens(
                        input_tokens=int(tokens.get("input") or 0) + int(cache.get("read") or 0),
                        output_tokens=int(tokens.get("output") or 0)
                        + int(tokens.get("reasoning") or 0))
                    if isinstance(part.get("cost"), int | float) and part["cost"]:
                        request.usage.add_cost(float(part["cost"]))
                    finished = part.get("reason") != "tool-calls"
                elif kind == "error":
                    errors.append(_error_text(event.get("error")))
            code = await run.wait()
        if errors or code != 0 or not finished:
            why = "; ".join(errors) or f"exited with code {code} before it finished a step"
            return TaskResult.failure(f"opencode failed: {why}{run.stderr_tail()}",
                                      code="opencode.failed")
        if session:
            self.sessions[request.context_id] = session
        text = "".join(answer).strip()
        if not text:
            return TaskResult.failure("opencode answered with no text",
                                      code="opencode.empty_answer")
        return TaskResult(text=text)


def _error_text(error: Any) -> str:
    """The message of an ``error`` event's error (``{name, data: {message}}``)."""
    if isinstance(error, dict):
        data = error.get("data") if isinstance(error.get("data"), dict) else {}
        message = data.get("message") or error.get("message")
        name = error.get("name")
        if message:
            return f"{name}: {message}" if name else str(message)
    return str(error)


if __name__ == "__main__":
    OpenCodeAgent().serve()
