"""One OpenEnv session plays one episode of a served task at a time.

``reset`` starts an episode and answers its first turn's prompt; a step is one tool call of the
turn's agent (through the env's gateway, as the agent's role) or the ``end_turn`` tool, which
hands the agent's reply back and answers the next turn's prompt, or the scores and the reward
once the run is over. An episode that can't go on ends in an observation (``done``, with an
error), never in an exception the client would see as a broken connection.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Coroutine, Mapping
from contextlib import AsyncExitStack
from typing import Any

import attrs
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.mcp_types import (
    RESERVED_TOOL_NAMES,
    CallToolAction,
    CallToolObservation,
    ListToolsAction,
    ListToolsObservation,
    Tool,
    ToolError,
    ToolErrorType,
)
from openenv.core.env_server.types import Observation, State
from pydantic import Field

from agent_env.api import (
    Episode,
    EpisodeError,
    ServedTask,
    ServedTasks,
    Turn,
    TurnTools,
    get_logger,
    mean_score,
    tool_result_text,
)

END_TURN = Tool(
    name="end_turn",
    description=("End your turn with your reply. The episode goes on to your next turn, or "
                 "ends and is scored."),
    input_schema={"type": "object",
                  "properties": {"response": {"type": "string", "description": "Your reply."}},
                  "required": ["response"]},
)
NO_EPISODE = "no episode is running in this session; call reset"
#: How long a session's close (a client gone) waits for its episode's teardown.
CLOSE_TIMEOUT_SECONDS = 300.0
#: ``status`` of an observation: the episode goes on; its env is not the one the session's last
#: episode had, because that one failed its reset; it ended in an error.
OK, ENV_REPLACED, ERROR = "ok", "env_replaced", "error"
#: What the pool says of an env it would not lend again (``Episode.env_returns``).
NOT_LENT_AGAIN = ("quarantined", "reset failed")


class EpisodeObservation(Observation):
    """What ``reset`` answers: the first turn of the episode, and the task it plays.

    OpenEnv leaves ``metadata`` out of what it sends, so everything a client needs is a field.
    """

    status: str = Field(default=OK, description="ok, env_replaced or error")
    message: str | None = Field(default=None, description="why the status is not ok")
    prompt: str | None = Field(default=None, description="the turn's prompt to the agent")
    system_prompt: str | None = None
    agent: str | None = Field(default=None, description="the agent the client plays")
    turn: str | None = Field(default=None, description="the prompting step's id")
    task: dict[str, Any] | None = Field(default=None, description="name, id, split, index")
    envs: dict[str, bool] = Field(default_factory=dict,
                                  description="deploy step id -> whether the env was reused")


@attrs.define(eq=False)
class Served:
    """What every session of one server shares: the tasks by split, the sessions holding an
    episode, and the teardowns still running, which the server's shutdown waits for."""

    #: every task served, whose env pools the shutdown tears down
    tasks: ServedTasks
    splits: dict[str, tuple[ServedTask, ...]]
    sessions: set[AgentEnvEnvironment] = attrs.field(factory=set)
    ending: set[asyncio.Future[Any]] = attrs.field(factory=set)

    def end_later(self, ending: Coroutine[Any, Any, Any]) -> asyncio.Future[Any]:
        future = asyncio.ensure_future(ending)
        self.ending.add(future)
        future.add_done_callback(self.ending.discard)
        return future

    def describe(self) -> dict[str, list[dict[str, Any]]]:
        """Every split's tasks, as ``GET /agentenv/tasks`` lists them."""
        return {split: [_task_info(t, split, i) for i, t in enumerate(tasks)]
                for split, tasks in self.splits.items()}

    async def close(self) -> None:
        """Abandon every open episode, wait for their teardowns, then tear the pools down."""
        await asyncio.gather(*(s.release_when_free("the server shut down")
                               for s in list(self.sessions)), return_exceptions=True)
        await asyncio.gather(*list(self.ending), return_exceptions=True)
        with contextlib.suppress(Exception):  # a pool that failed to go down logged it
            await self.tasks.close()


class AgentEnvEnvironment(Environment):  # type: ignore[misc]
    """One session. Reset, step and close take turns (one lock): OpenEnv may close a session
    from a worker thread while a step of it still runs on the server's loop."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, served: Served) -> None:
        super().__init__()
        self._served = served
        self._lock = asyncio.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: ServedTask | None = None
        self._episode: Episode | None = None
        self._turn: Turn | None = None
        self._tools: TurnTools | None = None
        self._stack: AsyncExitStack | None = None
        self._state = State()
        #: What became of the envs of the session's last episode (``Episode.env_returns``).
        self._returned: dict[str, str] = {}

    # -- OpenEnv's interface -------------------------------------------------------------------

    async def reset_async(self, seed: int | None = None, episode_id: str | None = None, *,
                          task: str | None = None, split: str | None = None,
                          index: int | None = None, **kwargs: Any) -> EpisodeObservation:
        """Start an episode of ``task`` (a name), or of task ``index`` of ``split``; the first
        task of ``all`` without either. The session's running episode is abandoned first."""
        async with self._lock:
            return await self._reset(task, split, index, seed)

    def reset(self, seed: int | None = None, episode_id: str | None = None,
              **kwargs: Any) -> EpisodeObservation:
        raise NotImplementedError("an AgentEnv episode runs on the server's event loop: "
                                  "reset_async")

    async def step_async(self, action: Any, timeout_s: float | None = None,
                         **kwargs: Any) -> Observation:
        async with self._lock:
            return await self._step(action, timeout_s)

    def step(self, action: Any, timeout_s: float | None = None, **kwargs: Any) -> Observation:
        raise NotImplementedError("an AgentEnv episode runs on the server's event loop: "
                                  "step_async")

    @property
    def state(self) -> State:
        return self._state

    def close(self) -> None:
        """The session is over (its client left): abandon its episode, releasing the env.

        OpenEnv calls this from a worker thread after a WebSocket session (which waits here
        until the teardown is done) and on the server's loop after a one-shot HTTP request
        (which can't wait: the teardown runs on, and the server's shutdown waits for it)."""
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        try:
            running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            self._served.end_later(self.release_when_free("the session closed"))
            return
        future = asyncio.run_coroutine_threadsafe(
            self.release_when_free("the client left the session"), loop)
        try:
            future.result(timeout=CLOSE_TIMEOUT_SECONDS)
        except Exception as exc:  # a teardown that failed is logged by it; never raise here
            get_logger("openenv").warning("closing a session failed", error=str(exc))

    # -- the episode ---------------------------------------------------------------------------

    async def _reset(self, name: str | None, split: str | None, index: int | None,
                     seed: int | None) -> EpisodeObservation:
        self._loop = asyncio.get_running_loop()
        await self._release("the client reset the session")
        previous, self._returned = self._returned, {}
        self._task, self._state = None, State()
        try:
            served, split, index = self._choose(name, split, index)
        except (LookupError, ValueError) as exc:
            self._state.done = True
            return EpisodeObservation(done=True, status=ERROR, message=str(exc))
        self._task = served
        self._state = State(episode_id=None, step_count=0, done=False, seed=seed,
                            task=_task_info(served, split, index), turn=None)
        self._served.sessions.add(self)
        try:
            self._episode = await served.spec.start()
            self._state.episode_id = self._episode.id
            turn = await self._episode.next_turn()
            if turn is None:
                raise EpisodeError("the run ended before the agent's first turn")
            await self._open(turn)
        except Exception as exc:
            message = await self._fail(exc)
            return EpisodeObservation(done=True, status=ERROR, message=message,
                                      task=self._state.task)
        replaced = sorted(env for env, what in previous.items() if what in NOT_LENT_AGAIN)
        outputs = self._episode.ctx.outputs
        return EpisodeObservation(
            done=False, status=ENV_REPLACED if replaced else OK,
            message=(f"env {', '.join(replaced)} of this session's last episode failed its "
                     "reset and was torn down; this episode runs on another"
                     if replaced else None),
            prompt=turn.prompt, system_prompt=turn.system_prompt, agent=turn.agent,
            turn=turn.step_id, task=self._state.task,
            envs={step: bool(out["reused"]) for step, out in outputs.items()
                  if isinstance(out, dict) and "reused" in out})

    def _choose(self, name: str | None, split: str | None,
                index: int | None) -> tuple[ServedTask, str, int]:
        splits = self._served.splits
        if name is not None:
            chosen = split or "all"
            for i, served in enumerate(splits.get(chosen, ())):
                if served.task.name == name:
                    return served, chosen, i
            names = ", ".join(t.task.name for t in splits.get(chosen, ()))
            raise LookupError(f"split {chosen!r} has no task {name!r} (its tasks: {names})")
        split = split or "all"
        if split not in splits:
            raise LookupError(f"there is no split {split!r}; the splits are "
                              f"{', '.join(splits)}")
        tasks = splits[split]
        index = 0 if index is None else index
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < len(tasks):
            raise ValueError(f"split {split!r} has {len(tasks)} task(s): index must be 0 to "
                             f"{len(tasks) - 1}, not {index!r}")
        return tasks[index], split, index

    async def _step(self, action: Any, timeout_s: float | None) -> Observation:
        if isinstance(action, ListToolsAction):
            if self._tools is None:
                return ListToolsObservation(tools=[], done=True)
            return ListToolsObservation(tools=[*map(_tool, self._tools.list()), END_TURN])
        if not isinstance(action, CallToolAction):
            raise TypeError(f"unsupported action {type(action).__name__}: send list_tools or "
                            "call_tool")
        name = action.tool_name
        if self._episode is None or self._tools is None:
            return _tool_error(name, ToolErrorType.EXECUTION_ERROR, NO_EPISODE, done=True)
        if self._episode.state == "finished" or (self._turn and not self._turn.is_open):
            return _tool_error(name, ToolErrorType.EXECUTION_ERROR,
                               await self._fail(self._why_over()), done=True)
        self._state.step_count += 1
        if name == END_TURN.name:
            return await self._end_turn(str(action.arguments.get("response") or ""))
        return await self._call(name, action.arguments, timeout_s)

    async def _call(self, name: str, arguments: dict[str, Any],
                    timeout_s: float | None) -> CallToolObservation:
        assert self._tools is not None
        try:
            result = await asyncio.wait_for(self._tools.call(name, arguments), timeout_s)
        except EpisodeError as exc:  # an unknown tool name (a closed turn was checked above)
            return _tool_error(name, ToolErrorType.TOOL_NOT_FOUND, str(exc))
        except TimeoutError:
            return _tool_error(name, ToolErrorType.TIMEOUT,
                               f"{name} did not answer within {timeout_s} s")
        text = tool_result_text(result)
        if result.get("isError"):
            return _tool_error(name, ToolErrorType.EXECUTION_ERROR, text)
        return CallToolObservation(tool_name=name, result={
            "content": result.get("content") or [],
            "structured_content": result.get("structuredContent"),
            "data": text, "is_error": False})

    async def _end_turn(self, response: str) -> CallToolObservation:
        episode, turn = self._episode, self._turn
        assert episode is not None and turn is not None
        before = episode.scores_so_far
        await turn.end(response)
        await self._close_tools()
        try:
            following = await episode.next_turn()
            if following is not None:
                await self._open(following)
                new = {k: v for k, v in episode.scores_so_far.items() if k not in before}
                return CallToolObservation(
                    tool_name=END_TURN.name, done=False,
                    reward=mean_score(new),
                    result={"prompt": following.prompt, "system_prompt": following.system_prompt,
                            "turn": following.step_id, "scores": new})
            scores = await episode.result()
        except Exception as exc:
            return _tool_error(END_TURN.name, ToolErrorType.EXECUTION_ERROR,
                               await self._fail(exc), done=True)
        await self._release("the episode ended")
        self._state.done = True
        assert self._task is not None
        try:
            reward = self._task.reward(scores)
        except Exception as exc:
            return _tool_error(END_TURN.name, ToolErrorType.EXECUTION_ERROR,
                               f"no reward: {_described(exc)}", done=True,
                               result={"scores": scores, "outcome": episode.outcome})
        return CallToolObservation(tool_name=END_TURN.name, done=True, reward=reward, result={
            "scores": scores, "outcome": episode.outcome, "reward": reward})

    async def _open(self, turn: Turn) -> None:
        self._turn, self._stack = turn, AsyncExitStack()
        self._tools = await self._stack.enter_async_context(turn.tools())
        self._state.turn = turn.step_id
        clash = sorted({t["name"] for t in self._tools.list()}
                       & {*RESERVED_TOOL_NAMES, END_TURN.name})
        if clash:
            raise EpisodeError(f"the env offers tools OpenEnv reserves: {', '.join(clash)}")

    def _why_over(self) -> str:
        turn = self._turn
        if turn is not None and turn.state == "open":
            return (f"turn '{turn.step_id}' ran out of time ({turn.timeout_seconds:g} s); the "
                    "run went on without the agent's reply")
        return "the run ended while the agent's turn was open"

    async def _fail(self, error: BaseException | str) -> str:
        """End the episode after an error; answers the message the client is given."""
        message = error if isinstance(error, str) else _described(error)
        await self._release(message)
        self._state.done = True
        return message

    async def release_when_free(self, reason: str) -> None:
        async with self._lock:
            await self._release(reason)

    async def _release(self, reason: str) -> None:
        """Abandon the episode (nothing, once it finished) and wait for its teardown, which
        gives its envs back to the pool; what became of them is kept for the next reset to
        tell. The caller holds the lock. The teardown is the server's to wait for, so a
        caller cancelled meanwhile (a client gone mid-reset) leaves it running, and the
        shutdown still waits for it."""
        episode, self._episode = self._episode, None
        self._served.sessions.discard(self)
        await self._close_tools()
        self._turn = None
        if episode is None:
            return
        await asyncio.shield(self._served.end_later(episode.abandon(reason)))
        self._returned = dict(episode.env_returns)

    async def _close_tools(self) -> None:
        stack, self._stack, self._tools = self._stack, None, None
        if stack is not None:
            await stack.aclose()


def _task_info(served: ServedTask, split: str, index: int) -> dict[str, Any]:
    prompt = served.spec.prompts[0] if served.spec.prompts else None
    return {"name": served.task.name, "id": served.task.id, "split": split, "index": index,
            "agent": served.spec.trainer_agents[0] if served.spec.trainer_agents else None,
            "prompt": getattr(prompt, "prompt", None)}


def _tool(listed: Mapping[str, Any]) -> Tool:
    return Tool(name=listed["name"], description=listed.get("description") or "",
                input_schema=listed.get("inputSchema") or {"type": "object"})


def _tool_error(name: str, kind: ToolErrorType, message: str, *, done: bool = False,
                result: Any = None) -> CallToolObservation:
    return CallToolObservation(tool_name=name, done=done, result=result,
                               error=ToolError(error_type=kind, message=message))


def _described(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"
