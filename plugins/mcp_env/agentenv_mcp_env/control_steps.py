"""Env control steps: what a task does to a deployed env around the agent, through its gateway.

* ``sync_env_clock`` arms the gateway's virtual clock (clock/v1: ``PUT /clock/set-time``) at
  ``virtual_time`` (RFC 3339, any UTC offset) running ``virtual_seconds_per_real_second`` (1:
  real time; 0: frozen; up to 86400, a day a second); the gateway tells every server that
  advertises clock/v1 where virtual time is served. A server that does not is skipped and named
  in the output, or fails the step with ``tolerate_missing_sync_time: false``.
* ``modify_env_tool_access`` disables or enables ``tools`` for ``role`` (``POST
  /tools/disable|enable``); the gateway then refuses (or again serves) those tools to callers
  of that role, and lists them accordingly. A tool name the env does not serve fails the step,
  naming the ones it does (a typo would otherwise disable nothing).

Both record what the gateway answered as the step's output.
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any

import attrs

from agent_env.api import PreflightView, Step, StepError

if TYPE_CHECKING:
    from agent_env.api import TaskContext

#: The fastest a virtual clock may run (the gateway's own limit): a day per real second.
MAX_RATE = 86400.0
ACTIONS = ("disable", "enable")


async def _gateway_call(ctx: TaskContext, env_id: str, method: str, path: str,
                        body: dict[str, Any] | None, timeout: float) -> dict[str, Any]:
    """One call to the env's gateway; StepError naming the route and its answer."""
    import aiohttp

    from agentenv_mcp_env.steps import deployment

    env = deployment(ctx, env_id)
    try:
        async with aiohttp.ClientSession(headers=env.headers) as http, http.request(
                method, f"{env.url}{path}", json=body,
                timeout=aiohttp.ClientTimeout(total=timeout)) as resp:
            text = await resp.text()
            if resp.status >= 300:
                raise StepError(f"{method} {path} on env {env.environment_name} answered HTTP "
                                f"{resp.status}: {text[:300]}")
            answer = await resp.json(content_type=None)
    except (aiohttp.ClientError, TimeoutError) as exc:
        raise StepError(f"{method} {path} on env {env.environment_name} failed: "
                        f"{exc or type(exc).__name__}") from None
    return dict(answer) if isinstance(answer, dict) else {}


def parse_time(value: object) -> dt.datetime | None:
    """An RFC 3339 time with its offset (``Z`` or ``+02:00``), or None when it is not one."""
    if not isinstance(value, str):
        return None
    try:
        parsed = dt.datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else None


@attrs.define(kw_only=True)
class SyncEnvClock(Step):
    """Arm the env's virtual clock (clock/v1) and point its servers at it.

    The gateway's clock starts at ``virtual_time`` and runs at ``virtual_seconds_per_real_second``;
    every server that advertises clock/v1 is told where virtual time is served, so its tools
    read that time. Put it right before the prompt, so the agent's timeline starts there. The
    output names the servers ``synced`` and ``skipped``.
    """

    type = "sync_env_clock"
    entity_fields = {"env_id": "envs"}

    env_id: str
    #: RFC 3339 with its offset: ``2026-03-01T09:00:00Z``, ``2026-03-01T09:00:00+01:00``.
    virtual_time: str
    #: 1: real time; 0: frozen; at most 86400 (a virtual day per real second).
    virtual_seconds_per_real_second: float = 1.0
    #: False: a server that does not take the clock fails the step instead of being skipped.
    tolerate_missing_sync_time: bool = True
    timeout_seconds: float = 30.0

    def check(self, view: PreflightView) -> list[str]:
        problems = super().check(view)
        if parse_time(self.virtual_time) is None:
            problems.append(f"virtual_time {self.virtual_time!r} must be an RFC 3339 time with "
                            "its offset, such as 2026-03-01T09:00:00Z or "
                            "2026-03-01T09:00:00+01:00")
        rate = self.virtual_seconds_per_real_second
        if isinstance(rate, bool) or not isinstance(rate, int | float) or \
                not 0 <= rate <= MAX_RATE:
            problems.append(f"virtual_seconds_per_real_second must be a number from 0 (frozen) "
                            f"to {MAX_RATE:g} (a day a second), not {rate!r}")
        if self.timeout_seconds <= 0:
            problems.append("timeout_seconds must be positive")
        return problems

    async def run(self, ctx: TaskContext) -> None:
        from agentenv_mcp_env.steps import deployment
        from agentenv_protocol.client import fetch_card

        answer = await _gateway_call(ctx, self.env_id, "PUT", "/clock/set-time", {
            "virtual_time": self.virtual_time,
            "virtual_seconds_per_real_second": self.virtual_seconds_per_real_second,
        }, self.timeout_seconds)
        env = deployment(ctx, self.env_id)
        card = await fetch_card(env.url, headers=env.headers, timeout=self.timeout_seconds)
        synced = [str(name) for name in answer.get("synced") or []]
        skipped = [c.name for c in card.children_environments or [] if c.name not in synced]
        if skipped and not self.tolerate_missing_sync_time:
            raise StepError(f"the clock is armed, but {', '.join(skipped)} of env "
                            f"{env.environment_name} did not take it (they do not serve "
                            "clock/v1's sync_time); tolerate_missing_sync_time: true skips them")
        ctx.outputs[self.id] = {"virtual_time": self.virtual_time,
                                "virtual_seconds_per_real_second":
                                    self.virtual_seconds_per_real_second,
                                "env_get_time_url": answer.get("env_get_time_url"),
                                "synced": synced, "skipped": skipped}


@attrs.define(kw_only=True)
class ModifyEnvToolAccess(Step):
    """Disable (or enable again) some of the env's tools for callers of one role.

    From then on the gateway refuses a disabled tool to that role and leaves it out of its
    ``tools/list``. A tool name the env does not serve fails the step, naming those it does.
    The output is the role's ``disabled`` and ``allowed`` tools after the change.
    """

    type = "modify_env_tool_access"
    entity_fields = {"env_id": "envs"}

    env_id: str
    #: ``disable`` or ``enable``.
    action: str
    #: The callers' role (their ``AgentEnv-Role``, as ``deploy_agent`` gives it).
    role: str
    tools: list[str]

    def check(self, view: PreflightView) -> list[str]:
        problems = super().check(view)
        if self.action not in ACTIONS:
            problems.append(f"action must be one of {', '.join(ACTIONS)}, not {self.action!r}")
        if not isinstance(self.role, str) or not self.role.strip():
            problems.append("role must be a role's name (a non-empty string)")
        if not isinstance(self.tools, list) or not self.tools or not all(
                isinstance(t, str) and t for t in self.tools):
            problems.append("tools must be a non-empty list of tool names")
        return problems

    async def run(self, ctx: TaskContext) -> None:
        answer = await _gateway_call(ctx, self.env_id, "POST", f"/tools/{self.action}",
                                     {"role": self.role, "tools": list(self.tools)}, 30.0)
        known = {*answer.get("disabled", []), *answer.get("allowed", [])}
        unknown = [t for t in self.tools if t not in known]
        if unknown:
            raise StepError(f"env '{self.env_id}' serves no tool {', '.join(map(repr, unknown))} "
                            f"(it serves: {', '.join(sorted(known)) or 'none'})")
        ctx.outputs[self.id] = {"action": self.action, "role": answer.get("role", self.role),
                                "disabled": answer.get("disabled", []),
                                "allowed": answer.get("allowed", [])}
