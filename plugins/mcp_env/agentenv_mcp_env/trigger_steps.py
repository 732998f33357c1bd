"""``register_env_triggers``: triggers/v1 on a deployed env's gateway, and the harness's half.

Why: a task author scripts what happens around the agent (a colleague answers the agent's
email, a deadline passes) without a model deciding when. The gateway detects and runs tool and
permission actions itself (:mod:`agentenv_protocol.triggers`); an ``nl`` action is a prompt to
an executor agent, which the gateway queues and this step's watcher delivers: it claims the
action, prompts the executor through the run's own ``prompt_agent`` (so the reply is recorded
like any prompt's, under ``<step id>.<trigger id>.<firing>``) and reports back. The watcher runs
until the task's teardown.

The reference's keys: ``env_id``, ``triggers``, ``watch_roles``, ``executor_agent_name``,
``executor_timeout_seconds``, ``await_fired`` and ``await_timeout_seconds`` (the step holds until
those triggers fired, failing at the timeout with each one's status and the gateway's failure
events). ``executor_model`` is ours: the model the executor is prompted with (a scripted one in
offline bundles). ``executor_hours`` (working hours) is not served here and is refused.
An executor must be deployed with a role outside ``watch_roles``: its own tool calls then fire
nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import weakref
from typing import TYPE_CHECKING, Any

import attrs

from agent_env.api import PreflightView, Step, StepError, step_of

if TYPE_CHECKING:
    from agent_env.api import TaskContext

#: Seconds a claim waits at the gateway for an nl action to be queued.
CLAIM_WAIT = 10.0
#: Seconds between reads of the triggers' state while ``await_fired`` waits.
AWAIT_POLL = 0.25
#: Running watchers, one per env of a task (several steps may register on one env).
_WATCHERS: weakref.WeakKeyDictionary[Any, dict[str, asyncio.Task[None]]] = \
    weakref.WeakKeyDictionary()


def agent_role(ctx: TaskContext, agent_name: str) -> str | None:
    """The role ``agent_name`` was deployed with (its ``deploy_agent`` step's output)."""
    for output in ctx.outputs.values():
        if isinstance(output, dict) and output.get("agent_name") == agent_name \
                and "role" in output:
            role = output["role"]
            return role if isinstance(role, str) and role else None
    return None


@attrs.define(kw_only=True)
class RegisterEnvTriggers(Step):
    """Register triggers on the env's gateway; deliver their prompts to executor agents."""

    type = "register_env_triggers"
    entity_fields = {"env_id": "envs"}

    env_id: str
    triggers: list[dict[str, Any]]
    #: Only calls by these roles provoke action triggers (a trigger's ``when.roles`` wins).
    watch_roles: list[str] | None = None
    #: The agent that carries out ``nl`` actions naming no ``executor``.
    executor_agent_name: str | None = None
    executor_timeout_seconds: float = 120
    executor_model: str | None = None
    executor_hours: dict[str, Any] | None = None
    await_fired: list[str] | None = None
    await_timeout_seconds: float = 120

    def executor_names(self) -> list[str]:
        named = [a.get("executor") for t in self.triggers if isinstance(t, dict)
                 for a in t.get("actions") or [] if isinstance(a, dict) and a.get("type") == "nl"]
        names = [n for n in named if isinstance(n, str) and n]
        return list(dict.fromkeys([*([self.executor_agent_name] if self.executor_agent_name
                                     else []), *names]))

    def check(self, view: PreflightView) -> list[str]:
        from agentenv_protocol.triggers import problems as trigger_problems

        problems = super().check(view)
        executors = {name: "?" for name in self.executor_names()}
        if self.executor_agent_name:
            executors[""] = "?"
        problems += trigger_problems(self.triggers, executors)
        ids = {t.get("id") for t in self.triggers if isinstance(t, dict)}
        unknown = [i for i in self.await_fired or [] if i not in ids]
        if unknown:
            problems.append(f"await_fired names {unknown}, which this step does not register")
        if self.executor_hours is not None:
            problems.append("executor_hours: executors' working hours are not served here; "
                            "leave it out (prompts reach the executor at once)")
        for key in ("executor_timeout_seconds", "await_timeout_seconds"):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
                problems.append(f"{key} must be a positive number of seconds")
        return problems

    async def run(self, ctx: TaskContext) -> None:
        from agentenv_mcp_env.control_steps import _gateway_call

        body: dict[str, Any] = {"triggers": self.triggers}
        if self.watch_roles is not None:
            body["watch_roles"] = self.watch_roles
        executors = {name: self._executor(ctx, name) for name in self.executor_names()}
        if self.executor_agent_name:
            body["executor"] = executors[self.executor_agent_name]
        body["executors"] = executors
        answer = await _gateway_call(ctx, self.env_id, "POST", "/triggers/register", body, 30)
        ctx.outputs[self.id] = {"env_id": self.env_id, "added": answer.get("added", []),
                                "executor_agent_names": list(executors)}
        if executors:
            self._watch(ctx)
        if self.await_fired:
            await self._await_fired(ctx)

    def _executor(self, ctx: TaskContext, name: str) -> dict[str, str]:
        ctx.agent(name)  # deployed, or a StepError naming it
        role = agent_role(ctx, name)
        if role is None:
            raise StepError(f"executor agent '{name}' was deployed without a role: its own tool "
                            "calls would fire triggers; deploy it with a role outside "
                            "watch_roles")
        if self.watch_roles is not None and role in self.watch_roles:
            raise StepError(f"executor agent '{name}' has role '{role}', which watch_roles "
                            "lists: its own tool calls would fire triggers")
        return {"name": name, "role": role}

    # -- the watcher: nl actions to executor agents --------------------------------------------
    def _watch(self, ctx: TaskContext) -> None:
        running = _WATCHERS.setdefault(ctx, {})
        if self.env_id in running and not running[self.env_id].done():
            return
        task = asyncio.ensure_future(self._deliver(ctx))
        running[self.env_id] = task

        async def stop() -> None:
            task.cancel()
            with contextlib.suppress(BaseException):
                await task

        ctx.on_teardown("trigger watcher", f"trigger watcher of env {self.env_id}", stop)

    async def _deliver(self, ctx: TaskContext) -> None:
        from agentenv_mcp_env.control_steps import _gateway_call

        while True:
            try:
                claimed = await _gateway_call(ctx, self.env_id, "POST", "/triggers/next",
                                              {"wait": CLAIM_WAIT}, CLAIM_WAIT + 20)
            except StepError as exc:  # the env went away: nothing more can fire
                ctx.note(f"{self.id}: stopped delivering trigger prompts ({exc})")
                return
            for action in claimed.get("actions") or []:
                await self._prompt(ctx, action)

    async def _prompt(self, ctx: TaskContext, action: dict[str, Any]) -> None:
        from agentenv_mcp_env.control_steps import _gateway_call

        name = str(action.get("executor") or self.executor_agent_name)
        key = f"{self.id}.{action.get('trigger_id')}.{action.get('firing')}"
        raw: dict[str, Any] = {"id": key, "agent_name": name,
                               "prompt": str(action.get("instruction")),
                               "timeout_seconds": self.executor_timeout_seconds}
        if self.executor_model:
            raw["model"] = self.executor_model
        ok, detail = False, ""
        try:
            prompt = step_of("prompt_agent", raw, f"trigger '{action.get('trigger_id')}'")
            await prompt.run(ctx)
            reply = ctx.outputs.get(key) or {}
            ok = not reply.get("error_type")
            detail = str(reply.get("error_message") or reply.get("response") or "")[:300]
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # recorded at the gateway as the action's failure
            detail = str(exc)[:300]
        ctx.note(f"trigger '{action.get('trigger_id')}' prompted '{name}': "
                 + ("answered" if ok else f"failed ({detail})"))
        with contextlib.suppress(StepError):
            await _gateway_call(ctx, self.env_id, "POST", "/triggers/ack", {
                "firing": action.get("firing"), "action": action.get("action"), "ok": ok,
                "detail": detail}, 30)

    # -- await_fired ---------------------------------------------------------------------------
    async def _await_fired(self, ctx: TaskContext) -> None:
        from agentenv_mcp_env.control_steps import _gateway_call

        wanted = list(dict.fromkeys(self.await_fired or []))
        deadline = time.monotonic() + float(self.await_timeout_seconds)
        seen: dict[str, Any] = {}
        state: dict[str, Any] = {}
        while True:
            state = await _gateway_call(ctx, self.env_id, "GET", "/triggers/state", None, 30)
            statuses = {t.get("id"): t.get("status") for t in state.get("triggers") or []}
            seen = {tid: statuses.get(tid) for tid in wanted}
            ctx.outputs[self.id]["awaited"] = seen
            if all(status == "fired" for status in seen.values()):
                return
            failed = sorted(t for t, s in seen.items() if s in ("failed", "cancelled"))
            if failed or time.monotonic() >= deadline:
                break
            await asyncio.sleep(AWAIT_POLL)
        why = (f"triggers {failed} failed before firing" if failed else
               f"triggers did not all fire within {self.await_timeout_seconds:g}s")
        events = [{k: v for k, v in e.items() if k not in ("seq", "ts", "virtual_time")}
                  for e in state.get("events") or []
                  if e.get("trigger_id") in seen and e.get("kind") in ("failed", "action_failed")]
        raise StepError(f"env '{self.env_id}': {why}; statuses {seen}"
                        + (f"; failures: {events[-6:]}" if events else ""))
