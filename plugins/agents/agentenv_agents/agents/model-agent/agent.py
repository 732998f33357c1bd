"""The model-agent: an OpenAI Chat Completions tool-calling loop over its envs' MCP tools.

Built on AgentEnv's A2A agent SDK. Each turn it lists the tools of every MCP server it was given
(``/ext/mcp-config``), offers them to the model as OpenAI tools, calls the model at
``AGENTENV_MODEL_BASE_URL`` (``/chat/completions``, bearer ``AGENTENV_MODEL_TOKEN``), runs the
tool calls the model asks for, and loops until the model answers in text (or ``max_turns``).

The trajectory (format ``agentenv-model-agent/1``) has one event per model call
(``model_call``: model, finish reason, token counts, text and the tool calls asked for), per
tool call (``tool_call``: its id, server, tool, arguments, result text, is_error) and the final
``answer``. Usage counts tool calls and the model's own token numbers. Skills given through
``/ext/skill-config`` are appended to the system prompt (name, description, SKILL.md).

A context is a conversation: each turn's messages start with the context's earlier turns,
rebuilt from its trajectory (``request.context_events``), so a second prompt remembers the
first, and a snapshot or changelog loaded into a context (snapshot/v1, no workspace) carries
the conversation with it. Each tool call ends in ``request.checkpoint()``: a changelog the
runtime enabled gets one increment per tool call. It serves the SDK's triggers/v1, so when it
plays a conversation's user a task can script that user's turns (``register_agent_triggers``),
and peer-agents/v1, so with peers set (``peer_agents``) it has a ``peer_send_message`` tool.
It lists install/v1: ``install_agent`` can start it inside a task's own container.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

import aiohttp
import attrs

from agentenv_protocol.agent import (
    AGENT_CONFIG_V1,
    INSTALL_V1,
    MCP_CONFIG_V1,
    PEER_AGENTS_V1,
    SKILL_CONFIG_V1,
    SNAPSHOT_V1,
    TRAJECTORY_V1,
    TRIGGERS_V1,
    AgentConfig,
    AgentEnvAgent,
    AgentIdentity,
    TaskRequest,
    TaskResult,
    a2a_agent,
)
from agentenv_protocol.client import McpClient

TRAJECTORY_FORMAT = "agentenv-model-agent/1"
DEFAULT_SYSTEM_PROMPT = ("You are an agent with tools. Use them when they help, then answer "
                         "the user in plain text.")


@attrs.define
class ModelAgentConfig(AgentConfig):
    model: str | None = None
    system_prompt: str | None = None
    max_turns: int = attrs.field(default=12, validator=attrs.validators.ge(1))


def _system_prompt(config: ModelAgentConfig, request: TaskRequest[ModelAgentConfig]) -> str:
    """The configured prompt, then each skill the runtime gave (skill-config/v1): its name,
    description and SKILL.md, so the model knows what it may do and how."""
    prompt = config.system_prompt or DEFAULT_SYSTEM_PROMPT
    for name, skill in sorted(request.skills.items()):
        prompt += f"\n\n# Skill: {name}\n{skill.description}\n\n{skill.skill_md}"
    return prompt


class ModelError(Exception):
    """The model endpoint failed; ``infra`` when it is not the model's own answer."""


def _tool_name(server: str, tool: str, many: bool) -> str:
    return f"{server}__{tool}" if many else tool


def conversation(events: list[Any]) -> list[dict[str, Any]]:
    """The chat messages of a context's earlier turns, from its trajectory events: each
    prompt, each model answer with the tool calls it asked for, each tool result. A tool call
    with no recorded result (a turn cut short) gets one saying so, as the API needs."""
    messages: list[dict[str, Any]] = []
    pending: list[str] = []

    def settle() -> None:
        for call_id in pending:
            messages.append({"role": "tool", "tool_call_id": call_id,
                             "content": "(no result: the turn ended first)"})
        pending.clear()

    for event in events:
        if not isinstance(event, dict):
            continue
        kind = event.get("type")
        if kind == "prompt" and isinstance(event.get("text"), str):
            settle()
            messages.append({"role": "user", "content": event["text"]})
        elif kind == "model_call":
            settle()
            calls = [c for c in event.get("calls") or [] if isinstance(c, dict) and c.get("id")]
            if calls:
                messages.append({"role": "assistant", "content": event.get("text"),
                                 "tool_calls": calls})
                pending.extend(c["id"] for c in calls)
            elif event.get("text"):
                messages.append({"role": "assistant", "content": event["text"]})
        elif kind == "tool_call" and event.get("tool_call_id") in pending:
            pending.remove(event["tool_call_id"])
            messages.append({"role": "tool", "tool_call_id": event["tool_call_id"],
                             "content": str(event.get("result") or "")})
    settle()
    return messages


@a2a_agent(
    identity=AgentIdentity(name="model-agent", version="0.1.0",
                           description="OpenAI tool calling over the MCP tools of its envs."),
    config=ModelAgentConfig,
    extensions=(AGENT_CONFIG_V1, MCP_CONFIG_V1, TRAJECTORY_V1, SKILL_CONFIG_V1, SNAPSHOT_V1,
                TRIGGERS_V1, PEER_AGENTS_V1, INSTALL_V1),
)
class ModelAgent(AgentEnvAgent):
    def __init__(self) -> None:
        self.base_url = os.environ.get("AGENTENV_MODEL_BASE_URL", "").rstrip("/")
        self.token = os.environ.get("AGENTENV_MODEL_TOKEN", "")
        self.default_model = os.environ.get("AGENTENV_MODEL_NAME") or None
        self.default_max_turns = int(os.environ.get("AGENTENV_MAX_TURNS") or 12)
        #: Show the model the images tools return (a screenshot), as a user message of
        #: image_url parts after the tool results: for models that read images (deploy_agent
        #: env_vars MODEL_AGENT_SHOW_IMAGES=1). Off, the model reads that an image was kept.
        self.show_images = os.environ.get("MODEL_AGENT_SHOW_IMAGES", "") in ("1", "true", "yes")

    async def run(self, request: TaskRequest[ModelAgentConfig]) -> TaskResult:
        config = request.config
        model = config.model or self.default_model
        if not self.base_url or not model:
            return TaskResult.failure("no model endpoint or model name is configured",
                                      code="model_agent.no_model")
        trajectory = request.trajectory
        trajectory.set_format(TRAJECTORY_FORMAT)
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": _system_prompt(config, request)},
            *conversation(request.context_events),
            {"role": "user", "content": request.text},
        ]
        trajectory.append({"type": "prompt", "text": request.text, "model": model})
        clients: dict[str, McpClient] = {}
        routes: dict[str, tuple[str, str]] = {}
        tools: list[dict[str, Any]] = []
        async with aiohttp.ClientSession() as http:
            try:
                many = len(request.mcp_servers) > 1
                for name, server in request.mcp_servers.items():
                    client = McpClient(server.url, headers=dict(server.headers), session=http,
                                       client_name="model-agent")
                    await client.connect()
                    clients[name] = client
                    for tool in await client.list_tools_raw():
                        exposed = _tool_name(name, tool["name"], many)
                        routes[exposed] = (name, tool["name"])
                        tools.append({"type": "function", "function": {
                            "name": exposed, "description": tool.get("description") or "",
                            "parameters": tool.get("inputSchema") or {"type": "object"}}})
                trajectory.append({"type": "tools", "tools": sorted(routes)})
                max_turns = config.max_turns or self.default_max_turns
                for _ in range(max_turns):
                    message = await self._complete(http, request, model, messages, tools)
                    messages.append(message)
                    calls = message.get("tool_calls") or []
                    if not calls:
                        text = message.get("content") or ""
                        trajectory.append({"type": "answer", "text": text})
                        if not text.strip():
                            return TaskResult.failure("the model answered with no text",
                                                      code="model_agent.empty_answer")
                        return TaskResult(text=text)
                    shown: list[dict[str, str]] = []
                    for call in calls:
                        answered, images = await self._run_tool(request, clients, routes, call)
                        messages.append(answered)
                        shown += images
                        await request.checkpoint()  # one changelog increment per tool call
                    if shown and self.show_images:
                        messages.append(images_message(shown))
                return TaskResult.failure(f"no answer within {max_turns} model turns",
                                          code="model_agent.max_turns")
            except ModelError as exc:
                trajectory.append({"type": "error", "message": str(exc)})
                return TaskResult(error_type="infra_error", error_code="model_agent.model_error",
                                  error_message=str(exc))
            finally:
                for client in clients.values():
                    try:
                        await client.close()
                    except Exception:  # closing is best effort
                        pass

    async def _complete(self, http: aiohttp.ClientSession, request: TaskRequest[Any],
                        model: str, messages: list[dict[str, Any]],
                        tools: list[dict[str, Any]]) -> dict[str, Any]:
        body: dict[str, Any] = {"model": model, "messages": messages}
        if tools:
            body["tools"] = tools
        started = time.monotonic()
        try:
            async with http.post(f"{self.base_url}/chat/completions", json=body,
                                 headers={"Authorization": f"Bearer {self.token}"},
                                 timeout=aiohttp.ClientTimeout(total=600)) as resp:
                text = await resp.text()
                status = resp.status
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise ModelError(f"the model endpoint did not answer: {type(exc).__name__}: "
                             f"{exc}") from None
        if status != 200:
            raise ModelError(f"the model endpoint answered HTTP {status}: {text[:500]}")
        try:
            answer = json.loads(text)
            choice = answer["choices"][0]
            message = dict(choice["message"])
        except (ValueError, KeyError, IndexError, TypeError):
            raise ModelError(f"the model endpoint's answer is not a chat completion: "
                             f"{text[:300]}") from None
        usage = answer.get("usage") or {}
        request.usage.add_tokens(input_tokens=int(usage.get("prompt_tokens") or 0),
                                 output_tokens=int(usage.get("completion_tokens") or 0))
        request.trajectory.append({
            "type": "model_call", "model": answer.get("model"),
            "finish_reason": choice.get("finish_reason"),
            # not "tokens": AgentEnv's run record drops keys that look like secrets
            "usage": {"input": usage.get("prompt_tokens"),
                      "output": usage.get("completion_tokens")},
            "text": message.get("content"),
            "tool_calls": [c.get("function", {}).get("name")
                           for c in message.get("tool_calls") or []],
            "calls": message.get("tool_calls") or [],  # whole: a later turn replays them
            "seconds": round(time.monotonic() - started, 3),
        })
        message.setdefault("content", None)
        message["role"] = "assistant"
        return {k: v for k, v in message.items() if k in ("role", "content", "tool_calls")}

    async def _run_tool(self, request: TaskRequest[Any], clients: dict[str, McpClient],
                        routes: dict[str, tuple[str, str]], call: dict[str, Any],
                        ) -> tuple[dict[str, Any], list[dict[str, str]]]:
        """Run one tool call: the tool message for the model, and the images it returned."""
        function = call.get("function") or {}
        exposed = function.get("name", "")
        raw_args = function.get("arguments") or "{}"
        request.usage.add_tool_call()
        try:
            arguments = json.loads(raw_args) if isinstance(raw_args, str) else dict(raw_args)
        except ValueError:
            arguments = None
        images: list[dict[str, str]] = []
        if exposed not in routes:
            text, is_error, server, tool = f"unknown tool {exposed!r}", True, None, exposed
        elif not isinstance(arguments, dict):
            server, tool = routes[exposed]
            text, is_error = f"arguments are not a JSON object: {raw_args!r}", True
        else:
            server, tool = routes[exposed]
            try:
                result = await clients[server].call_tool(tool, arguments)
                text, is_error = result.text, result.is_error
                images = kept_images(result.content)
            except Exception as exc:  # the tool's failure is the model's to read
                text, is_error = f"tool call failed: {type(exc).__name__}: {exc}", True
        if images and not self.show_images:  # the transcript keeps the pictures
            text += "".join(f"\n[{image['mime_type']} image, kept in the transcript]"
                            for image in images)
        event = {"type": "tool_call", "tool_call_id": call.get("id", ""), "server": server,
                 "tool": tool, "arguments": arguments, "result": text, "is_error": is_error}
        if images:
            event["images"] = images
        request.trajectory.append(event)
        return {"role": "tool", "tool_call_id": call.get("id", ""), "content": text}, images


def images_message(images: list[dict[str, str]]) -> dict[str, Any]:
    """The user message that shows the model what the last tool calls returned as images (Chat
    Completions has no images in tool messages)."""
    return {"role": "user", "content": [
        {"type": "text", "text": "The tool calls above returned these images, in order:"},
        *({"type": "image_url", "image_url": {
            "url": f"data:{image['mime_type']};base64,{image['data']}"}} for image in images)]}


#: Images a tool result may leave in the transcript, and the largest one (base64 characters).
MAX_IMAGES = 4
MAX_IMAGE_CHARS = 4 * 1024 * 1024


def kept_images(content: list[dict[str, Any]]) -> list[dict[str, str]]:
    """A tool result's image parts (an MCP ``image`` content: base64 ``data``, ``mimeType``)
    as the transcript keeps them, at most :data:`MAX_IMAGES` of at most
    :data:`MAX_IMAGE_CHARS` each: a screenshot is how a browser or desktop run is reviewed."""
    kept = []
    for part in content:
        data = part.get("data")
        if part.get("type") == "image" and isinstance(data, str) \
                and len(data) <= MAX_IMAGE_CHARS and len(kept) < MAX_IMAGES:
            kept.append({"mime_type": str(part.get("mimeType") or "image/png"), "data": data})
    return kept


if __name__ == "__main__":
    ModelAgent().serve()
