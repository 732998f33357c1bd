"""The A2A server for one agent, on aiohttp: card, JSON-RPC at ``/a2a`` (SSE for streams),
``/health`` and the extension routes.

Every turn runs as its own asyncio task, so ``message/send`` can answer at once
(``blocking: false``) and ``tasks/cancel`` can cancel it. Turns of one context wait for each
other in arrival order (an agent's session is not safe to drive twice at once); turns of
different contexts run side by side. State is in memory, per app: no module state.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import attrs
from aiohttp import web

from ..errors import AgentEnvError
from ..guard import BadBody, loads_body
from ..parts import DataPart, Part, TextPart
from ..transfer import write_object, write_object_from_wire
from .changelog import CHANGELOG_PATH, ChangelogState
from .extensions import (
    CONFIG_PATH,
    MCP_PATH,
    TRAJECTORY_PATH,
    ConfigState,
    McpState,
    TrajectoryQuery,
    read_body,
    trajectory_card_entry,
)
from .framework import (
    AGENT_CONFIG_V1,
    INSTALL_V1,
    MCP_CONFIG_V1,
    PEER_AGENTS_V1,
    SKILL_CONFIG_V1,
    SNAPSHOT_V1,
    TRAJECTORY_V1,
    TRIGGERS_V1,
    AgentEnvAgent,
    AgentSpec,
    bind_address,
    spec_of,
)
from .models import AgentSkill, Artifact, McpServer, Progress, TaskRequest, TaskResult, Usage
from .peers import PEER_MCP_PATH, PEERS_PATH, PEERS_SERVER, PeerState
from .skills import SKILL_PATH, SkillState
from .snapshot import SNAPSHOT_CONFIG_PATH, SnapshotState
from .trajectory import MAX_CONTEXTS, MAX_LIMIT, CursorError, TrajectoryNotFound, TrajectoryStore
from .triggers import DECIDE_PATH, TRIGGERS_PATH, AgentTriggers
from .wire import (
    EXTENDED_CARD_NOT_CONFIGURED,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    PROTOCOL_VERSION,
    PUSH_NOT_SUPPORTED,
    TASK_NOT_CANCELABLE,
    TASK_NOT_FOUND,
    TERMINAL_STATES,
    UNSUPPORTED_OPERATION,
    WIRE,
    Message,
    MessageSendParams,
    Task,
    TaskArtifactUpdateEvent,
    TaskIdParams,
    TaskQueryParams,
    TaskStatus,
    TaskStatusUpdateEvent,
    WireArtifact,
    describe,
    now,
    rpc_error,
    rpc_result,
)

log = logging.getLogger("agentenv_protocol.agent")

DEFAULT_MAX_BODY_BYTES = 32 * 1024 * 1024
DEFAULT_CANCEL_GRACE = 10.0
DEFAULT_MAX_TASKS = 10_000
_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode

Event = TaskStatusUpdateEvent | TaskArtifactUpdateEvent


class RpcError(Exception):
    """A JSON-RPC error answer, raised from a method handler."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data


@attrs.define(eq=False)
class TaskRun:
    """One A2A task: its state as clients see it, and the asyncio task running its turn."""

    id: str
    context_id: str
    state: str = "submitted"
    message: Message | None = None
    timestamp: str = attrs.field(factory=now)
    history: list[Message] = attrs.field(factory=list)
    artifacts: list[WireArtifact] = attrs.field(factory=list)
    runner: asyncio.Task[None] | None = None
    settled: asyncio.Event = attrs.field(factory=asyncio.Event)
    subscribers: list[asyncio.Queue[Event]] = attrs.field(factory=list)
    cancel_requested: bool = False

    def snapshot(self, history_length: int | None = None) -> Task:
        history = self.history
        if history_length is not None:
            history = history[-history_length:] if history_length > 0 else []
        return Task(self.id, self.context_id, TaskStatus(self.state, self.message, self.timestamp),
                    artifacts=list(self.artifacts) or None, history=list(history))


class _ContextGate:
    """One FIFO lock per context id, dropped when nobody holds or waits for it."""

    def __init__(self) -> None:
        self._locks: dict[str, tuple[asyncio.Lock, list[int]]] = {}

    @contextlib.asynccontextmanager
    async def hold(self, context_id: str) -> AsyncIterator[None]:
        lock, users = self._locks.setdefault(context_id, (asyncio.Lock(), [0]))
        users[0] += 1
        try:
            async with lock:
                yield
        finally:
            users[0] -= 1
            if users[0] == 0:
                self._locks.pop(context_id, None)


def _reply_data(usage: Usage, error_type: str | None = None, error_code: str | None = None,
                error_message: str | None = None, structured_output: Any = None) -> DataPart:
    return DataPart({"usage": usage.to_wire(), "error_type": error_type,
                     "error_code": error_code, "error_message": error_message,
                     "structured_output": structured_output})


def _skill_wire(skill: AgentSkill | Any) -> dict[str, Any]:
    if not isinstance(skill, AgentSkill):
        return dict(skill)
    out: dict[str, Any] = {"id": skill.id, "name": skill.name,
                           "description": skill.description, "tags": list(skill.tags)}
    for key, value in (("examples", skill.examples), ("inputModes", skill.input_modes),
                       ("outputModes", skill.output_modes)):
        if value is not None:
            out[key] = list(value)
    return out


class AgentServer:
    """Serves one agent instance: task bookkeeping, the JSON-RPC methods, extension state."""

    def __init__(self, agent: AgentEnvAgent, *, max_contexts: int = MAX_CONTEXTS,
                 cancel_grace: float = DEFAULT_CANCEL_GRACE,
                 max_tasks: int = DEFAULT_MAX_TASKS, secured: bool = False) -> None:
        self.agent = agent
        self.secured = secured
        self.spec: AgentSpec = spec_of(agent)
        self.cancel_grace = cancel_grace
        self.max_tasks = max_tasks
        self.tasks: dict[str, TaskRun] = {}
        self.gate = _ContextGate()
        self.trajectories = TrajectoryStore(max_contexts)
        self.config = ConfigState(self.spec.config_class)
        self.mcp = McpState()
        self.skills = SkillState()
        self.snapshots = SnapshotState(self.trajectories, agent.workspace, self._context_running,
                                       agent.save_session, agent.load_session)
        self.changelog = ChangelogState(self.trajectories, agent.workspace,
                                        self._context_running)
        self.triggers = AgentTriggers()
        self.peers = PeerState()
        #: The bearer token its routes need (the peers' tool server is called with it).
        self.token: str | None = None
        self.card = self._build_card()
        self._card_body = _dumps(self.card).encode()
        self._methods: dict[str, Callable[[dict[str, Any]], Awaitable[Any]]] = {
            "message/send": self._message_send,
            "tasks/get": self._tasks_get,
            "tasks/cancel": self._tasks_cancel,
        }

    # -- card --------------------------------------------------------------------------------
    def _build_card(self) -> dict[str, Any]:
        ident = self.spec.identity
        exts: list[dict[str, Any]] = []
        for uri in self.spec.extensions:
            if uri == AGENT_CONFIG_V1:
                exts.append(self.config.card_entry())
            elif uri == MCP_CONFIG_V1:
                exts.append(McpState.card_entry())
            elif uri == TRAJECTORY_V1:
                exts.append(trajectory_card_entry())
            elif uri == SKILL_CONFIG_V1:
                exts.append(SkillState.card_entry())
            elif uri == SNAPSHOT_V1:
                entry = SnapshotState.card_entry()
                entry["params"]["methods"].update(ChangelogState.card_params())
                exts.append(entry)
            elif uri == TRIGGERS_V1:
                exts.append(AgentTriggers.card_entry(TRIGGERS_V1))
            elif uri == PEER_AGENTS_V1:
                exts.append(PeerState.card_entry(PEER_AGENTS_V1))
            elif uri == INSTALL_V1:
                from .install import card_entry as install_entry

                exts.append(install_entry(INSTALL_V1, bind_address(None, None)[1]))
        security: dict[str, Any] = {}
        if self.secured:  # A2A's way to say "send a bearer token"
            security = {"securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
                        "security": [{"bearer": []}]}
        # agent-config's name and description, once set, are the card's (its identity)
        current = self.config.current
        return {
            **security,
            "name": getattr(current, "name", None) or ident.name,
            "description": getattr(current, "description", None) or ident.description,
            "version": ident.version,
            "url": ident.url,
            "protocolVersion": PROTOCOL_VERSION,
            "preferredTransport": "JSONRPC",
            "defaultInputModes": list(ident.input_modes),
            "defaultOutputModes": list(ident.output_modes),
            "skills": [_skill_wire(s) for s in ident.skills],
            "capabilities": {
                "streaming": self.spec.streaming,
                "pushNotifications": False,
                "stateTransitionHistory": False,
                "extensions": exts,
            },
        }

    # -- task lifecycle ----------------------------------------------------------------------
    def _accept(self, send: MessageSendParams) -> TaskRun:
        """Create (or continue an input-required) task for a user message and start its turn."""
        msg = send.message
        if msg.role != "user":
            raise RpcError(INVALID_PARAMS, "message.role must be 'user'")
        if not msg.parts:
            raise RpcError(INVALID_PARAMS, "message.parts must hold at least one part")
        if msg.task_id is not None:
            run = self.tasks.get(msg.task_id)
            if run is None:
                raise RpcError(TASK_NOT_FOUND, f"task not found: {msg.task_id}")
            if run.state != "input-required":
                raise RpcError(INVALID_PARAMS, f"task {run.id} is {run.state}; only an "
                               "input-required task takes another message")
            if msg.context_id is not None and msg.context_id != run.context_id:
                raise RpcError(INVALID_PARAMS, "message.contextId differs from the task's")
            run.state, run.timestamp, run.settled = "submitted", now(), asyncio.Event()
        else:
            run = TaskRun(uuid.uuid4().hex, msg.context_id or uuid.uuid4().hex)
            self.tasks[run.id] = run
            self._forget_old_tasks()
        msg = attrs.evolve(msg, context_id=run.context_id, task_id=run.id)
        if run.message is not None:
            run.history.append(run.message)
            run.message = None
        run.history.append(msg)
        request: TaskRequest[Any] = TaskRequest(
            task_id=run.id,
            context_id=run.context_id,
            parts=list(msg.parts),
            config=self.config.snapshot(),
            mcp_servers=self.mcp.snapshot(),
            skills=self.skills.snapshot(),
            metadata={**(msg.metadata or {}), **(send.metadata or {})},
            context_events=self.trajectories.history(run.context_id),
            trajectory=self.trajectories.open_task(run.context_id, run.id),
            message_id=msg.message_id,
            checkpoint=functools.partial(self.changelog.checkpoint, run.context_id,
                                         "tool_call"),
        )
        run.runner = asyncio.create_task(self._drive(run, request), name=f"a2a-task-{run.id}")
        return run

    def _forget_old_tasks(self) -> None:
        """Keep at most ``max_tasks`` records: the oldest terminal ones go first (a long-lived
        agent must not grow without bound); unsettled tasks are always kept."""
        excess = len(self.tasks) - self.max_tasks
        if excess <= 0:
            return
        for task_id, run in list(self.tasks.items()):
            if excess <= 0:
                break
            if run.state in TERMINAL_STATES:
                del self.tasks[task_id]
                excess -= 1

    def _agent_message(self, run: TaskRun, parts: list[Part]) -> Message:
        return Message(uuid.uuid4().hex, "agent", parts, context_id=run.context_id,
                       task_id=run.id)

    def _publish(self, run: TaskRun, event: Event) -> None:
        for queue in run.subscribers:
            queue.put_nowait(event)

    def _set_status(self, run: TaskRun, state: str, message: Message | None,
                    final: bool = False) -> None:
        if run.message is not None:  # the previous status message becomes history
            run.history.append(run.message)
        run.state, run.message, run.timestamp = state, message, now()
        self.trajectories.set_state(run.id, state)
        status = TaskStatus(state, message, run.timestamp)
        self._publish(run, TaskStatusUpdateEvent(run.id, run.context_id, status, final))
        if final:
            run.settled.set()

    def _add_artifact(self, run: TaskRun, artifact: Artifact) -> None:
        wire = WireArtifact(artifact.artifact_id, list(artifact.parts), artifact.name,
                            artifact.description)
        run.artifacts.append(wire)
        self._publish(run, TaskArtifactUpdateEvent(run.id, run.context_id, wire,
                                                   last_chunk=True))

    def _finish(self, run: TaskRun, state: str, parts: list[Part]) -> None:
        """Settle the turn; a task already terminal (say, canceled) stays as it is."""
        if run.state in TERMINAL_STATES:
            return
        self._set_status(run, state, self._agent_message(run, parts), final=True)

    def _finish_failed(self, run: TaskRun, usage: Usage, error_type: str, code: str,
                       message: str) -> None:
        self._finish(run, "failed", [TextPart(message),
                                     _reply_data(usage, error_type, code, message)])

    def _finish_canceled(self, run: TaskRun, usage: Usage) -> None:
        self._finish(run, "canceled", [TextPart("task canceled"), _reply_data(usage)])

    async def _drive(self, run: TaskRun, request: TaskRequest[Any]) -> None:
        """Run one turn to its end, whatever happens; never raises."""
        try:
            async with self.gate.hold(run.context_id):
                if run.state in TERMINAL_STATES:
                    return
                self._set_status(run, "working", None)
                try:
                    result = await self._invoke(run, request)
                finally:  # the turn's work is logged before anyone hears it ended
                    await self.changelog.checkpoint(run.context_id, "turn")
        except asyncio.CancelledError:
            self._finish_canceled(run, request.usage)
            return
        except _Timeout as exc:
            self._finish_failed(run, request.usage, "agent_error", "framework.timeout",
                                str(exc))
            return
        except _BadResult as exc:
            self._finish_failed(run, request.usage, "infra_error", "framework.invalid_result",
                                str(exc))
            return
        except Exception as exc:
            log.exception("agent run failed (task %s)", run.id)
            self._finish_failed(run, request.usage, "infra_error",
                                "framework.unhandled_exception",
                                f"{type(exc).__name__}: {exc}")
            return
        if run.cancel_requested:  # the run ignored the cancel; the client asked for it
            self._finish_canceled(run, request.usage)
            return
        self._finish_result(run, request, result)

    async def _invoke(self, run: TaskRun, request: TaskRequest[Any]) -> TaskResult:
        seconds = getattr(request.config, "timeout_seconds", None)
        timeout = asyncio.timeout(seconds if seconds and seconds > 0 else None)
        try:
            async with timeout:
                if not self.spec.streaming:
                    result = await self.agent.run(request)
                else:
                    result = await self._consume(run, self.agent.run(request))
        except TimeoutError:
            if timeout.expired():
                raise _Timeout(f"the agent did not finish within {seconds} s") from None
            raise
        if not isinstance(result, TaskResult):
            raise _BadResult(f"run returned {type(result).__name__}, not a TaskResult")
        return result

    async def _consume(self, run: TaskRun, updates: Any) -> TaskResult:
        try:
            async for item in updates:
                if isinstance(item, TaskResult):
                    return item
                if isinstance(item, str):
                    item = Progress(text=item)
                if isinstance(item, Progress):
                    parts = item.parts()
                    if parts:
                        self._set_status(run, "working", self._agent_message(run, parts))
                elif isinstance(item, Artifact):
                    self._add_artifact(run, item)
                else:
                    raise _BadResult(f"run yielded {type(item).__name__}; yield str, "
                                     "Progress, Artifact or (last) a TaskResult")
            return TaskResult()  # ran out without a result: an empty success, refused below
        finally:
            await updates.aclose()

    def _finish_result(self, run: TaskRun, request: TaskRequest[Any],
                       result: TaskResult) -> None:
        usage = result.usage or request.usage
        if result.is_empty():
            self._finish_failed(run, usage, "agent_error", "framework.empty_result",
                                "the agent finished without a reply, output or artifact")
            return
        try:
            _dumps(result.structured_output)
        except (TypeError, ValueError) as exc:
            self._finish_failed(run, usage, "infra_error", "framework.invalid_result",
                                f"structured_output is not JSON: {exc}")
            return
        for artifact in result.artifacts:
            self._add_artifact(run, artifact)
        text = result.text or (result.error_message or "" if result.error_type else "")
        parts: list[Part] = [TextPart(text)] if text else []
        parts.extend(result.parts)
        parts.append(_reply_data(usage, result.error_type, result.error_code,
                                 result.error_message, result.structured_output))
        if result.error_type is not None:
            state = "failed"
        elif result.input_required:
            state = "input-required"
        else:
            state = "completed"
        self._finish(run, state, parts)

    async def close(self) -> None:
        """Cancel the turns still running and wait for them (server shutdown)."""
        runners = [r.runner for r in self.tasks.values()
                   if r.runner is not None and not r.runner.done()]
        for runner in runners:
            runner.cancel()
        if runners:
            await asyncio.gather(*runners, return_exceptions=True)

    # -- JSON-RPC methods --------------------------------------------------------------------
    @staticmethod
    def _structure(params: dict[str, Any], cls: type[Any]) -> Any:
        try:
            return WIRE.structure(params, cls)
        except Exception as exc:
            raise RpcError(INVALID_PARAMS, "invalid params", {"detail": describe(exc)}) from None

    def _get(self, task_id: str) -> TaskRun:
        run = self.tasks.get(task_id)
        if run is None:
            raise RpcError(TASK_NOT_FOUND, f"task not found: {task_id}")
        return run

    async def _message_send(self, params: dict[str, Any]) -> Any:
        send: MessageSendParams = self._structure(params, MessageSendParams)
        cfg = send.configuration
        run = self._accept(send)
        if cfg is None or cfg.blocking is not False:
            await run.settled.wait()
        return WIRE.unstructure(run.snapshot(cfg.history_length if cfg else None))

    async def _tasks_get(self, params: dict[str, Any]) -> Any:
        query: TaskQueryParams = self._structure(params, TaskQueryParams)
        return WIRE.unstructure(self._get(query.id).snapshot(query.history_length))

    async def _tasks_cancel(self, params: dict[str, Any]) -> Any:
        ids: TaskIdParams = self._structure(params, TaskIdParams)
        run = self._get(ids.id)
        if run.state in TERMINAL_STATES:
            raise RpcError(TASK_NOT_CANCELABLE,
                           f"task {run.id} is {run.state} and cannot be canceled")
        run.cancel_requested = True
        runner = run.runner
        if runner is not None and not runner.done():
            runner.cancel()
            await asyncio.wait({runner}, timeout=self.cancel_grace)
        self._finish_canceled(run, Usage())  # no-op when the run already settled as canceled
        return WIRE.unstructure(run.snapshot())

    # -- HTTP --------------------------------------------------------------------------------
    async def handle_card(self, request: web.Request) -> web.Response:
        return web.Response(body=self._card_body, content_type="application/json")

    async def handle_health(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def handle_rpc(self, request: web.Request) -> web.StreamResponse:
        """``POST /a2a``: JSON-RPC 2.0 (HTTP 200 throughout); streams answer as SSE."""
        try:
            msg = loads_body(await request.read())
        except BadBody as exc:
            return _rpc_json(rpc_error(None, PARSE_ERROR, f"parse error: {exc}"))
        if not isinstance(msg, dict):
            return _rpc_json(rpc_error(None, INVALID_REQUEST, "invalid request"))
        msg_id = msg.get("id")
        method = msg.get("method")
        if msg.get("jsonrpc") != "2.0" or not isinstance(method, str):
            return _rpc_json(rpc_error(msg_id, INVALID_REQUEST, "invalid request"))
        params = msg.get("params")
        if params is None:
            params = {}
        try:
            if not isinstance(params, dict):
                raise RpcError(INVALID_PARAMS, "params must be an object")
            if method in ("message/stream", "tasks/resubscribe"):
                return await self._stream(request, msg_id, method, params)
            handler = self._methods.get(method)
            if handler is None:
                raise _unhandled_method(method)
            result = await handler(params)
        except RpcError as exc:
            return _rpc_json(rpc_error(msg_id, exc.code, exc.message, exc.data))
        except Exception as exc:
            log.exception("JSON-RPC %s failed", method)
            return _rpc_json(rpc_error(msg_id, INTERNAL_ERROR, f"internal error: {exc}"))
        return _rpc_json(rpc_result(msg_id, result))

    async def _stream(self, request: web.Request, msg_id: Any, method: str,
                      params: dict[str, Any]) -> web.StreamResponse:
        if not self.spec.streaming:
            raise RpcError(UNSUPPORTED_OPERATION,
                           f"{method} is not supported: this agent does not stream")
        queue: asyncio.Queue[Event] = asyncio.Queue()
        if method == "message/stream":
            run = self._accept(self._structure(params, MessageSendParams))
        else:
            run = self._get(self._structure(params, TaskIdParams).id)
        # subscribed before the turn can run: _accept only scheduled it
        run.subscribers.append(queue)
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream",
                                           "Cache-Control": "no-cache"})
        try:
            await resp.prepare(request)
            await _sse(resp, rpc_result(msg_id, WIRE.unstructure(run.snapshot())))
            if run.settled.is_set():
                status = TaskStatus(run.state, run.message, run.timestamp)
                final = TaskStatusUpdateEvent(run.id, run.context_id, status, True)
                await _sse(resp, rpc_result(msg_id, WIRE.unstructure(final)))
            else:
                while True:
                    event = await queue.get()
                    await _sse(resp, rpc_result(msg_id, WIRE.unstructure(event)))
                    if isinstance(event, TaskStatusUpdateEvent) and event.final:
                        break
            await resp.write_eof()
        except ConnectionResetError:  # the reader went away; the turn runs on
            log.debug("stream reader for task %s went away", run.id)
        finally:
            run.subscribers.remove(queue)
        return resp

    async def handle_config_set(self, request: web.Request) -> web.Response:
        async def op(body: Any) -> Any:
            self.config.set(body)
            if isinstance(body, dict) and {"name", "description"} & set(body):
                self.card = self._build_card()
                self._card_body = _dumps(self.card).encode()
            return {"status": "updated"}

        return await _ext_call(request, op)

    async def handle_config_get(self, request: web.Request) -> web.Response:
        return web.json_response({"config": self.config.readback()})

    async def handle_mcp_add(self, request: web.Request) -> web.Response:
        async def op(body: Any) -> Any:
            server = self.mcp.add(body)
            return {"status": "added", "name": server.name, "url": server.url}

        return await _ext_call(request, op)

    async def handle_mcp_list(self, request: web.Request) -> web.Response:
        return web.json_response(self.mcp.listing())

    def _context_running(self, context_id: str) -> bool:
        return any(run.context_id == context_id and run.state not in TERMINAL_STATES
                   and run.state != "input-required" for run in self.tasks.values())

    async def handle_snapshot_save(self, request: web.Request) -> web.Response:
        return await _ext_call(request, self.snapshots.save)

    async def handle_snapshot_load(self, request: web.Request) -> web.Response:
        return await _ext_call(request, self.snapshots.load)

    async def handle_changelog_enable(self, request: web.Request) -> web.Response:
        return await _ext_call(request, self.changelog.enable)

    async def handle_changelog_apply(self, request: web.Request) -> web.Response:
        return await _ext_call(request, self.changelog.apply)

    async def handle_changelog_status(self, request: web.Request) -> web.Response:
        return web.json_response(self.changelog.status())

    async def handle_skill_add(self, request: web.Request) -> web.Response:
        async def op(body: Any) -> Any:
            return {"name": (await self.skills.add(body, self.agent.skill_added)).name}

        return await _ext_call(request, op)

    async def handle_triggers_register(self, request: web.Request) -> web.Response:
        async def op(body: Any) -> Any:
            return self.triggers.register(body)

        return await _ext_call(request, op)

    async def handle_triggers_decide(self, request: web.Request) -> web.Response:
        async def op(body: Any) -> Any:
            return self.triggers.decide(body)

        return await _ext_call(request, op)

    async def handle_peers_set(self, request: web.Request) -> web.Response:
        async def op(body: Any) -> Any:
            answer = self.peers.set(body)
            sockname = request.transport.get_extra_info("sockname") if request.transport \
                else None
            port = sockname[1] if isinstance(sockname, tuple) else request.url.port
            url = f"http://127.0.0.1:{port}{PEER_MCP_PATH}"
            registered = self.mcp.servers.get(PEERS_SERVER)
            if self.peers.peers and (registered is None or registered.url == url):
                headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
                self.mcp.servers[PEERS_SERVER] = McpServer(PEERS_SERVER, url, headers)
            elif not self.peers.peers and registered is not None and registered.url == url:
                del self.mcp.servers[PEERS_SERVER]
            return answer

        return await _ext_call(request, op)

    async def handle_peers_list(self, request: web.Request) -> web.Response:
        return web.json_response(self.peers.listing())

    async def handle_triggers_state(self, request: web.Request) -> web.Response:
        return web.json_response(self.triggers.state())

    async def handle_skill_list(self, request: web.Request) -> web.Response:
        return web.json_response(self.skills.listing())

    async def handle_trajectory(self, request: web.Request) -> web.Response:
        async def op(body: Any) -> Any:
            query: TrajectoryQuery = read_body(body, TrajectoryQuery)
            query.check()
            try:
                if query.after is None:
                    whole = self.trajectories.whole(task_id=query.task_id,
                                                    context_id=query.context_id)
                    if query.objects is None:
                        return {"trajectory": whole}
                    return {"objects": {"trajectory": await _upload_trajectory(
                        query.objects["trajectory"], whole)}}
                page = self.trajectories.page(
                    after=query.after, limit=query.limit or MAX_LIMIT,
                    task_id=query.task_id, context_id=query.context_id)
            except TrajectoryNotFound as exc:
                raise AgentEnvError("not_found", str(exc), status=404) from None
            except CursorError as exc:
                raise AgentEnvError("invalid_params", str(exc), status=400) from None
            return attrs.asdict(page)

        return await _ext_call(request, op)


async def _upload_trajectory(grant: Any, trajectory: Any) -> dict[str, Any]:
    """PUT a whole trajectory (JSON) through the runtime's WriteObject grant; the transfer's
    errors (``grant_expired`` 410, ``transfer_too_large`` 413, ...) answer the request."""
    obj = write_object_from_wire(grant)
    uploaded = await write_object(obj, json.dumps(trajectory, default=str).encode())
    return {"size_bytes": uploaded.size_bytes, "sha256": uploaded.sha256}


class _Timeout(Exception):
    """The turn ran past the config's ``timeout_seconds``."""


class _BadResult(Exception):
    """The run returned or yielded something that is not a turn's result."""


def _unhandled_method(method: str) -> RpcError:
    if method.startswith("tasks/pushNotificationConfig/"):
        return RpcError(PUSH_NOT_SUPPORTED, "push notifications are not supported")
    if method == "agent/getAuthenticatedExtendedCard":
        return RpcError(EXTENDED_CARD_NOT_CONFIGURED, "no authenticated extended card")
    return RpcError(METHOD_NOT_FOUND, f"method not found: {method}")


def _rpc_json(body: dict[str, Any]) -> web.Response:
    return web.Response(text=_dumps(body), content_type="application/json")


async def _sse(resp: web.StreamResponse, body: dict[str, Any]) -> None:
    await resp.write(f"data: {_dumps(body)}\n\n".encode())


async def _ext_call(request: web.Request,
                    op: Callable[[Any], Awaitable[Any]]) -> web.Response:
    """Read a JSON body, run the op; AgentEnvError answers its status with the error body."""
    raw = await request.read()
    try:
        body = loads_body(raw) if raw.strip() else {}
    except BadBody as exc:
        return _ext_error(AgentEnvError("invalid_params", f"body is not valid JSON: {exc}"))
    try:
        return web.json_response(await op(body))
    except AgentEnvError as exc:
        return _ext_error(exc)


def _ext_error(exc: AgentEnvError) -> web.Response:
    return web.json_response({"ok": False, "error": exc.to_dict()}, status=exc.status)


SERVER_KEY = web.AppKey("agentenv_agent_server", AgentServer)


#: Routes anyone may read with a token set: liveness and the card (which says a token is needed).
PUBLIC_PATHS = frozenset({"/health", "/.well-known/agent-card.json", "/.well-known/agent.json"})


def bearer_guard(token: str) -> Any:
    """Middleware: every route but :data:`PUBLIC_PATHS` needs ``Authorization: Bearer token``.

    Why: an agent's port is published on the host, and whoever reaches it drives a model on
    the run's account; the reference's agents take no token at all.
    """
    import hmac

    expected = f"Bearer {token}".encode()

    @web.middleware
    async def guard(request: web.Request, handler: Any) -> web.StreamResponse:
        if request.path in PUBLIC_PATHS:
            return await handler(request)
        given = request.headers.get("Authorization", "").encode("utf-8", "surrogateescape")
        if not hmac.compare_digest(given, expected):
            return web.json_response(
                {"ok": False, "error": {"code": "unauthorized",
                                        "message": "missing or wrong bearer token"}},
                status=401, headers={"WWW-Authenticate": "Bearer"})
        return await handler(request)

    return guard


def create_app(agent: AgentEnvAgent, *, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
               max_contexts: int = MAX_CONTEXTS,
               cancel_grace: float = DEFAULT_CANCEL_GRACE,
               max_tasks: int = DEFAULT_MAX_TASKS, token: str | None = None) -> web.Application:
    """Build the aiohttp app serving ``agent`` (an instance of an ``@a2a_agent`` class).

    ``max_contexts`` bounds the trajectories kept, ``max_tasks`` the task records (terminal
    ones beyond it are forgotten, oldest first); ``cancel_grace`` is how long ``tasks/cancel``
    waits for the run to wind down before answering. With ``token``, every route but the card
    and ``/health`` needs ``Authorization: Bearer <token>`` (the card declares the scheme).
    """
    server = AgentServer(agent, max_contexts=max_contexts, cancel_grace=cancel_grace,
                         max_tasks=max_tasks, secured=bool(token))
    server.token = token
    app = web.Application(client_max_size=max_body_bytes,
                          middlewares=[bearer_guard(token)] if token else [])
    app[SERVER_KEY] = server
    app.router.add_get("/health", server.handle_health)
    app.router.add_get("/.well-known/agent-card.json", server.handle_card)
    app.router.add_get("/.well-known/agent.json", server.handle_card)
    app.router.add_post(server.spec.identity.url, server.handle_rpc)
    exts = server.spec.extensions
    if AGENT_CONFIG_V1 in exts:
        app.router.add_post(CONFIG_PATH, server.handle_config_set)
        app.router.add_get(CONFIG_PATH, server.handle_config_get)
    if MCP_CONFIG_V1 in exts:
        app.router.add_post(MCP_PATH, server.handle_mcp_add)
        app.router.add_get(MCP_PATH, server.handle_mcp_list)
    if TRAJECTORY_V1 in exts:
        app.router.add_post(TRAJECTORY_PATH, server.handle_trajectory)
    if SNAPSHOT_V1 in exts:
        app.router.add_post(SNAPSHOT_CONFIG_PATH, server.handle_snapshot_save)
        app.router.add_put(SNAPSHOT_CONFIG_PATH, server.handle_snapshot_load)
        app.router.add_post(CHANGELOG_PATH, server.handle_changelog_enable)
        app.router.add_put(CHANGELOG_PATH, server.handle_changelog_apply)
        app.router.add_get(CHANGELOG_PATH, server.handle_changelog_status)
    if SKILL_CONFIG_V1 in exts:
        app.router.add_post(SKILL_PATH, server.handle_skill_add)
        app.router.add_get(SKILL_PATH, server.handle_skill_list)
    if PEER_AGENTS_V1 in exts:
        from ..mcp_http import McpEndpoint

        peers_mcp = McpEndpoint(server.peers, server_name="agentenv-peers")
        app.router.add_post(PEERS_PATH, server.handle_peers_set)
        app.router.add_get(PEERS_PATH, server.handle_peers_list)
        app.router.add_post(PEER_MCP_PATH, peers_mcp.handle_post)
        app.router.add_get(PEER_MCP_PATH, peers_mcp.handle_get)
        app.router.add_delete(PEER_MCP_PATH, peers_mcp.handle_delete)
    if TRIGGERS_V1 in exts:
        app.router.add_post(TRIGGERS_PATH, server.handle_triggers_register)
        app.router.add_get(TRIGGERS_PATH, server.handle_triggers_state)
        app.router.add_post(DECIDE_PATH, server.handle_triggers_decide)

    async def lifecycle(app: web.Application) -> AsyncIterator[None]:
        await agent.setup()
        yield
        await server.close()
        await agent.teardown()

    app.cleanup_ctx.append(lifecycle)
    return app


def _export(server: AgentServer, port: int, target: str) -> int:
    """install/v1's export (:mod:`.install`); the process's exit code."""
    import sys

    from .install import export

    if INSTALL_V1 not in server.spec.extensions:
        print(f"agent {server.spec.identity.name!r} does not declare install/v1, so it is not "
              "exported; list INSTALL_V1 in its @a2a_agent extensions", file=sys.stderr)
        return 3
    print(f"install/v1: exported to {export(server.card, port, target)}", flush=True)
    return 0


def serve(agent: AgentEnvAgent, host: str | None = None, port: int | None = None,
          **options: Any) -> None:
    """Run the agent's server until interrupted (``A2A_HOST`` / ``A2A_PORT`` when not given;
    ``A2A_TOKEN``, when set, is the bearer token every non-public route needs)."""
    import os

    host, port = bind_address(host, port)
    options.setdefault("token", os.environ.get("A2A_TOKEN") or None)
    app = create_app(agent, **options)
    name = spec_of(agent).identity.name
    from .install import EXPORT_ENV

    if target := os.environ.get(EXPORT_ENV):  # install/v1: export, do not serve
        raise SystemExit(_export(app[SERVER_KEY], port, target))
    print(f"A2A agent {name!r} serving on http://{host}:{port}", flush=True)
    web.run_app(app, host=host, port=port, print=None, access_log=None)
