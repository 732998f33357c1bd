"""The verifiers environment: one rollout plays one episode of a task through the episode API.

* **dataset**: a row per task an outside agent can play (``prompt``: the task's system prompt
  and first prompt; ``info``: the task's name, id and agent);
* **tools**: at the rollout's start an episode starts (an env from the pool, else a deploy) and
  the model is offered that turn's tools, the env's MCP tools as the agent's role;
* **turns**: a model reply with tool calls gets the tools' results; a reply without any ends
  the agent's turn with its text. The task's next prompt, if it has one, comes back as a user
  message with the next turn's tools; otherwise the run finishes and is scored;
* **rubric**: the reward is the task's scores made one number (the mean by default, a step's
  score with ``reward=STEP_ID``, or a function), and each score is a metric of its own
  (``score_<step id>``). A rollout that stops early (``max_turns``, a timeout) ends the open
  turns with the model's last text, so the task scores what the agent did.
"""

from __future__ import annotations

import json
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import attrs
import verifiers as vf

from agent_env.api import (
    Episode,
    Reward,
    ServedTask,
    ServedTasks,
    Turn,
    TurnTools,
    get_logger,
    served_tasks,
    tool_result_text,
)

#: The key of this environment's own record in a rollout's state.
PLAY = "agentenv"


@attrs.define(eq=False)
class Play:
    """One rollout's episode, its open turn and that turn's tools."""

    served: ServedTask
    episode: Episode
    turn: Turn | None = None
    tools: TurnTools | None = None
    stack: AsyncExitStack | None = None
    #: the next turn's prompt, handed to the model as a user message
    pending: str | None = None
    scores: dict[str, float] | None = None
    reward: float | None = None
    error: str | None = None

    async def open(self, turn: Turn) -> None:
        self.turn, self.stack = turn, AsyncExitStack()
        self.tools = await self.stack.enter_async_context(turn.tools())

    async def close_tools(self) -> None:
        stack, self.stack, self.tools = self.stack, None, None
        if stack is not None:
            await stack.aclose()

    def tool_defs(self) -> list[vf.Tool]:
        assert self.tools is not None
        return [vf.Tool(name=t["name"], description=t.get("description") or "",
                        parameters=t.get("inputSchema") or {"type": "object", "properties": {}})
                for t in self.tools.list()]

    async def end_turn(self, reply: str) -> bool:
        """End the open turn with ``reply``; True while the episode has another turn (opened
        and kept in ``pending``), False once it finished and was scored."""
        assert self.turn is not None
        await self.turn.end(response=reply)
        await self.close_tools()
        following = await self.episode.next_turn()
        if following is not None:
            await self.open(following)
            self.pending = following.prompt
            return True
        self.turn = None
        self.scores = await self.episode.result()
        try:
            self.reward = self.served.reward(self.scores)
        except Exception as exc:  # a reward=STEP the run did not score: no reward, said why
            self.error = f"no reward: {type(exc).__name__}: {exc}"
        return False


class AgentEnvEnvironment(vf.MultiTurnEnv):  # type: ignore[misc]
    """See the module docstring."""

    def __init__(self, found: ServedTasks, tasks: dict[str, ServedTask],
                 rows: list[dict[str, Any]], max_turns: int, **kwargs: Any) -> None:
        from datasets import Dataset

        #: what the bundle serves (whose env pools :func:`close` tears down), and the tasks
        #: this environment's rows play, by name
        self.found, self.served = found, tasks
        metrics = sorted({step_id for t in tasks.values() for step_id in t.scoring})
        rubric = vf.Rubric(funcs=[self.task_reward], weights=[1.0])
        for step_id in metrics:
            rubric.add_metric(_score_metric(step_id))
        dataset = Dataset.from_list(rows)  # the tasks are both what it trains and evaluates on
        super().__init__(dataset=dataset, eval_dataset=dataset, rubric=rubric,
                         max_turns=max_turns, **kwargs)

    async def setup_state(self, state: vf.State) -> None:
        name = (state.get("info") or {}).get("agentenv_task")
        if name not in self.served:
            raise vf.Error(f"the row names no task this environment serves: {name!r} "
                           f"(it serves {', '.join(self.served)})")
        served = self.served[name]
        try:
            play = Play(served, await served.spec.start())
            state[PLAY] = play  # from here on, the cleanup below ends the episode
            turn = await play.episode.next_turn()
            if turn is None:
                raise vf.Error(f"task {name!r} ended before the agent's first turn")
            await play.open(turn)
        except vf.Error:
            raise
        except Exception as exc:  # the env could not come up: the rollout's error, said why
            raise vf.InfraError(f"task {name!r}: {type(exc).__name__}: {exc}") from exc
        state["tool_defs"] = play.tool_defs()

    async def env_response(self, messages: vf.Messages, state: vf.State,
                           **kwargs: Any) -> vf.Messages:
        play: Play = state[PLAY]
        if play.pending is not None:  # the task's next prompt, with the next turn's tools
            prompt, play.pending = play.pending, None
            state["tool_defs"] = play.tool_defs()
            return [vf.UserMessage(content=prompt)]
        answers: list[vf.Message] = []
        for raw in _field(messages[-1], "tool_calls") or []:
            call = json.loads(raw) if isinstance(raw, str) else raw  # verifiers' wire form
            answers.append(vf.ToolMessage(tool_call_id=str(_field(call, "id")),
                                          content=await self._call(play, call)))
        return answers

    async def _call(self, play: Play, call: Any) -> str:
        name, raw = str(_field(call, "name")), _field(call, "arguments")
        try:
            arguments = json.loads(raw or "{}") if isinstance(raw, str) else raw
        except ValueError as exc:
            return f"the arguments are not JSON: {exc}"
        if not isinstance(arguments, dict):
            return "the arguments must be a JSON object"
        assert play.tools is not None
        try:
            result = await play.tools.call(name, arguments)
        except Exception as exc:  # an unknown tool, a turn out of time: the model is told
            return f"{type(exc).__name__}: {exc}"
        text = tool_result_text(result)
        return f"error: {text}" if result.get("isError") else text

    @vf.stop
    async def turn_replied(self, state: vf.State) -> bool:
        """A reply without tool calls ends the agent's turn: stop once the episode is over."""
        play: Play | None = state.get(PLAY)
        if play is None or not state["trajectory"] or play.turn is None:
            return False
        last = state["trajectory"][-1]["completion"][-1]
        if _field(last, "role") != "assistant" or _field(last, "tool_calls"):
            return False
        try:
            return not await play.end_turn(_text(last))
        except Exception as exc:  # the run failed (a step, the env): the rollout's error
            play.error = f"{type(exc).__name__}: {exc}"
            state["error"] = vf.Error(f"task {play.served.task.name!r}: {play.error}")
            return True

    @vf.cleanup
    async def finish_episode(self, state: vf.State) -> None:
        """A rollout that stopped with a turn open (max_turns, a timeout, an error) ends its
        turns with the model's last text, so the run finishes and scores what was done."""
        play: Play | None = state.get(PLAY)
        if play is None:
            return
        try:
            last = _last_assistant_text(state)
            while play.turn is not None and play.scores is None:
                if not await play.end_turn(last):
                    break
                last = ""
        except Exception as exc:
            play.error = f"{type(exc).__name__}: {exc}"
        finally:
            await play.close_tools()
            if play.scores is None:  # never scored (setup cut short, a failure): stop the run
                await play.episode.abandon(play.error or "the rollout ended")
        if play.error:
            get_logger("verifiers").warning("rollout not scored", error=play.error)

    async def task_reward(self, state: vf.State) -> float:
        """The task's reward (0 when its run recorded none or failed)."""
        play: Play | None = state.get(PLAY)
        return float(play.reward) if play is not None and play.reward is not None else 0.0


def _score_metric(step_id: str) -> Any:
    async def metric(state: vf.State) -> float:
        play: Play | None = state.get(PLAY)
        return float((play.scores or {}).get(step_id, 0.0)) if play is not None else 0.0

    metric.__name__ = f"score_{step_id}"
    return metric


def _field(message: Any, name: str) -> Any:
    """A message's field: verifiers holds messages as its models, and some as dicts."""
    return message.get(name) if isinstance(message, dict) else getattr(message, name, None)


def _text(message: Any) -> str:
    content = _field(message, "content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(getattr(part, "text", None) or (part.get("text", "")
                                                             if isinstance(part, dict) else ""))
                       for part in content)
    return ""


def _last_assistant_text(state: vf.State) -> str:
    for step in reversed(state.get("trajectory") or []):
        for message in reversed(step["completion"]):
            if _field(message, "role") == "assistant" and _text(message):
                return _text(message)
    return ""


def load_environment(bundle: str | Path, *, tasks: list[str] | None = None,
                     reward: str | Reward | None = None, sandbox: str | None = None,
                     max_turns: int = 10, turn_timeout: float | None = None,
                     reuse_envs: bool = True, max_envs: int | None = None,
                     **kwargs: Any) -> AgentEnvEnvironment:
    """The verifiers environment of ``bundle``'s tasks (a folder, or an installed bundle's
    name), or only of ``tasks`` (names). ``reward`` makes the reward of the scores (the mean
    by default); ``sandbox`` is where envs deploy; ``max_turns`` bounds the model's replies
    per rollout; ``reuse_envs`` resets and lends envs between rollouts, ``max_envs`` bounds
    the envs up at once. Other keyword arguments go to ``vf.MultiTurnEnv``."""
    found = served_tasks(bundle, reward=reward, sandbox=sandbox, turn_timeout=turn_timeout,
                         reuse_envs=reuse_envs, max_envs=max_envs)
    by_name = found.by_name()
    if tasks is not None:
        unknown = [name for name in tasks if name not in by_name]
        if unknown:
            from agent_env.api import UserError

            raise UserError(f"{found.name} serves no task {', '.join(map(repr, unknown))} "
                            f"(it serves {', '.join(by_name)})")
        by_name = {name: by_name[name] for name in tasks}
    for why in found.refused:
        get_logger("verifiers").warning("task left out", reason=why)
    rows = []
    for name, served in by_name.items():
        first = served.spec.prompts[0]
        prompt = ([{"role": "system", "content": first.system_prompt}]
                  if first.system_prompt else [])
        prompt.append({"role": "user", "content": first.prompt})
        rows.append({"prompt": prompt, "answer": "",
                     "info": {"agentenv_task": name, "agentenv_task_id": served.task.id,
                              "agent": first.agent}})
    return AgentEnvEnvironment(found, by_name, rows, max_turns, env_id="agentenv-verifiers",
                               **kwargs)


async def close(environment: AgentEnvEnvironment) -> None:
    """Tear the environment's env pools down (reused envs stay up between rollouts)."""
    await environment.found.close()
