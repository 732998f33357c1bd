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

* ``apply_server_config`` invokes config extensions the servers advertise (set-errors/v1,
  from the SDK's ``InjectsFaults``: a tool that fails or answers slowly on purpose), through
  the gateway's pass-through; the agent never sees them.

Each records what was answered as the step's output.
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any

import attrs

from agent_env.api import PreflightView, Step, StepError
from agentenv_protocol.clock import MAX_RATE  # the gateway's own limit: a day a real second

if TYPE_CHECKING:
    from agent_env.api import TaskContext

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


_DIRECTIVE_KEYS = ("service", "environment", "uri", "args", "method")


@attrs.define(kw_only=True)
class ApplyServerConfig(Step):
    """Invoke config extensions on the env's servers before the agent runs.

    Each directive names a server (``service``, or ``environment`` as newer task files say;
    ``"*"``: every server), the extension's ``uri`` as its card advertises it (such as
    ``urn:agentenv:set-errors/v1``, which env servers get from the SDK's ``InjectsFaults``) and
    the ``args`` it is sent; ``method`` picks the operation of an extension that has several
    (``set_errors``). A server that does not advertise the extension fails the step, or is
    skipped with ``tolerate_unadvertised: true``; one that refuses the args always fails it.
    The output lists each call's answer under ``applied`` and the skipped servers.
    """

    type = "apply_server_config"
    entity_fields = {"env_id": "envs"}

    env_id: str
    #: ``[{"service", "uri", "args", "method"?}]``: one extension call each.
    directives: list[dict[str, Any]]
    timeout_seconds: float = 30.0
    tolerate_unadvertised: bool = False

    def check(self, view: PreflightView) -> list[str]:
        problems = super().check(view)
        if not isinstance(self.directives, list) or not self.directives:
            return [*problems, "directives must be a non-empty list of {service, uri, args}"]
        for index, directive in enumerate(self.directives):
            where = f"directives[{index}]"
            if not isinstance(directive, dict):
                problems.append(f"{where} must be an object {{service, uri, args}}")
                continue
            unknown = sorted(k for k in directive if k not in _DIRECTIVE_KEYS)
            if unknown:
                problems.append(f"{where}: unknown key(s) {', '.join(unknown)} (takes: service "
                                "or environment, uri, args, method)")
            service = directive.get("service", directive.get("environment"))
            if not isinstance(service, str) or not service:
                problems.append(f"{where} needs service: a server's name, or \"*\" for all")
            if not isinstance(directive.get("uri"), str) or not directive.get("uri"):
                problems.append(f"{where} needs uri: the extension's URI on the card")
            if not isinstance(directive.get("args", {}), dict):
                problems.append(f"{where}: args must be an object")
        if self.timeout_seconds <= 0:
            problems.append("timeout_seconds must be positive")
        return problems

    async def run(self, ctx: TaskContext) -> None:
        from agentenv_mcp_env.steps import deployment
        from agentenv_protocol.client import fetch_card_raw

        env = deployment(ctx, self.env_id)
        card = await fetch_card_raw(env.url, headers=env.headers, timeout=self.timeout_seconds)
        children = {str(c.get("name")): c for c in card.get("children_environments") or []
                    if isinstance(c, dict)}
        applied: list[dict[str, Any]] = []
        skipped: list[dict[str, str]] = []
        for directive in self.directives:
            service = str(directive.get("service", directive.get("environment")))
            uri = str(directive["uri"])
            targets = list(children) if service == "*" else [service]
            for name in targets:
                if name not in children:
                    raise StepError(f"env '{self.env_id}' has no server '{name}' (servers: "
                                    f"{', '.join(sorted(children)) or 'none'})")
                operation = _operation(children[name], uri, directive.get("method"))
                if operation is None:
                    if self.tolerate_unadvertised:
                        skipped.append({"service": name, "uri": uri})
                        continue
                    raise StepError(f"server '{name}' of env '{self.env_id}' does not "
                                    f"advertise {uri} (tolerate_unadvertised: true skips it)")
                verb, endpoint = operation
                answer = await _gateway_call(ctx, self.env_id, verb, endpoint,
                                             dict(directive.get("args") or {}),
                                             self.timeout_seconds)
                applied.append({"service": name, "uri": uri, "answer": answer})
        ctx.outputs[self.id] = {"applied": applied, "skipped": skipped}


def _operation(child: dict[str, Any], uri: str, method: object) -> tuple[str, str] | None:
    """(HTTP verb, endpoint) of extension ``uri``'s operation ``method`` (or its only one) on a
    child's card, as the gateway rewrote it; None when the child does not advertise ``uri``;
    StepError when it has several operations and ``method`` picks none of them."""
    extensions = (child.get("capabilities") or {}).get("extensions") or []
    found = next((e for e in extensions if isinstance(e, dict) and e.get("uri") == uri), None)
    if found is None:
        return None
    params = found.get("params") or {}
    methods = params.get("methods") or {}
    if isinstance(method, str) and method in methods:
        chosen = methods[method]
    elif method is None and len(methods) == 1:
        chosen = next(iter(methods.values()))
    elif method is None and not methods and params.get("endpoint"):
        return "POST", str(params["endpoint"])
    else:
        raise StepError(f"{uri} on server '{child.get('name')}': give method, one of "
                        f"{', '.join(sorted(methods)) or 'none'}")
    return str(chosen.get("method") or "POST"), str(chosen["endpoint"])


#: Servers saved at once by snapshot_env (each a data/get of its whole state).
SNAPSHOT_CONCURRENCY = 3


@attrs.define(kw_only=True)
class SnapshotEnv(Step):
    """Save the env's live state as an ``environment_universe`` artifact.

    Each server that serves ``data/get`` is saved as ``<environment name>/state.agentenv-
    parts.json`` (its answer's parts); a ``load_artifact`` of the universe into an env of the
    same servers replays them (``data/reset``, ``data/add``), so the state comes back as it
    was. ``include_env_trajectory`` adds the gateway's trajectory as
    ``metadata/trajectory/trajectory.jsonl``. The artifact is ``snapshot_id`` (default
    ``snapshots/<run instance>/<step id>``); the output names it, its version, and the servers
    saved and skipped (those without ``data/get``).
    """

    type = "snapshot_env"
    example = {
        'id': 'save',
        'type': 'snapshot_env',
        'env_id': 'notes',
        'include_env_trajectory': True,
    }
    entity_fields = {"env_id": "envs"}

    env_id: str
    #: The deploy_env step whose deployment of ``env_id`` to save (a check, as load_artifact's).
    env_step_id: str | None = None
    #: The universe artifact's id (default ``snapshots/<run instance>/<step id>``).
    snapshot_id: str | None = None
    #: The universe the env was seeded from, kept in the output for the record.
    original_universe_artifact_id: str | None = None
    export_timeout_seconds: float = 600.0
    include_env_trajectory: bool = False
    include_env_changes: bool = False
    env_instance_id: str | None = None
    gateway_url: str | None = None

    def check(self, view: PreflightView) -> list[str]:
        problems = super().check(view)
        if self.env_instance_id is not None or self.gateway_url is not None:
            problems.append("env_instance_id / gateway_url: a snapshot here is of an env this "
                            "run deployed (env_id), whose token it holds; leave them out")
        if self.include_env_changes:
            problems.append("include_env_changes: the changes/v1 log is not saved with a "
                            "snapshot here; leave it out (the trajectory is, with "
                            "include_env_trajectory)")
        if self.export_timeout_seconds <= 0:
            problems.append("export_timeout_seconds must be positive")
        return problems

    async def run(self, ctx: TaskContext) -> None:
        import asyncio
        import json

        from agent_env.api import put_artifact_bytes
        from agentenv_mcp_env.seeding import PARTS_SUFFIX
        from agentenv_mcp_env.steps import deployment
        from agentenv_protocol.client import DataPlaneClient, fetch_card_raw
        from agentenv_protocol.errors import ProtocolError, TransportError

        env = deployment(ctx, self.env_id)
        if self.env_step_id is not None:
            output = ctx.outputs.get(self.env_step_id)
            if not isinstance(output, dict) or output.get("instance_id") != env.instance_id:
                raise StepError(f"env_step_id '{self.env_step_id}' names no deployment of env "
                                f"'{self.env_id}' (it is deployed as {env.instance_id})")
        card = await fetch_card_raw(env.url, headers=env.headers,
                                    timeout=self.export_timeout_seconds)
        children = [c for c in card.get("children_environments") or [] if isinstance(c, dict)]
        names = [s.environment_name or str(c.get("name"))
                 for s, c in zip(env.servers, children, strict=False)] \
            if len(children) == len(env.servers) else [str(c.get("name")) for c in children]
        gate = asyncio.Semaphore(SNAPSHOT_CONCURRENCY)

        async def save(child: dict[str, Any]) -> list[Any] | None:
            operations = (child.get("capabilities") or {}).get("operations")
            if operations is not None and "data/get" not in operations:
                return None
            async with gate, DataPlaneClient(f"{env.url}/env/{child.get('name')}",
                                             headers=env.headers,
                                             timeout=self.export_timeout_seconds) as data:
                try:
                    answer = await data.call("data/get", {})
                except ProtocolError as exc:
                    if exc.code == -32601:  # method not found: nothing to save
                        return None
                    raise StepError(f"data/get on {child.get('name')} failed: {exc}") from None
                except TransportError as exc:
                    raise StepError(f"data/get on {child.get('name')} failed: {exc}") from None
            parts = answer.get("parts") if isinstance(answer, dict) else None
            return list(parts or [])

        saved = await asyncio.gather(*(save(c) for c in children))
        files: dict[str, bytes] = {}
        skipped = []
        for name, parts in zip(names, saved, strict=True):
            if parts is None:
                skipped.append(name)
            else:
                files[f"{name}/state{PARTS_SUFFIX}"] = json.dumps(
                    {"parts": parts}, sort_keys=True).encode()
        if not files:
            raise StepError(f"env '{self.env_id}': no server serves data/get, so there is no "
                            "state to save")
        if self.include_env_trajectory:
            files["metadata/trajectory/trajectory.jsonl"] = await _trajectory(env)
        artifact_id = self.snapshot_id or f"snapshots/{ctx.instance_id}/{self.id}"
        line = await asyncio.to_thread(put_artifact_bytes, artifact_id, "environment_universe",
                                       files, f"snapshot of env {self.env_id}")
        ctx.outputs[self.id] = {"artifact_id": artifact_id, "version": line.version,
                                "environments": sorted(n for n in names if n not in skipped),
                                "skipped": skipped,
                                "original_universe_artifact_id":
                                    self.original_universe_artifact_id}


async def _trajectory(env: Any) -> bytes:
    """The gateway's whole trajectory (JSON lines), page by page."""
    import aiohttp

    lines: list[bytes] = []
    after: str | None = None
    async with aiohttp.ClientSession(headers=env.headers) as http:
        while True:
            query = f"?limit=500{f'&after={after}' if after else ''}"
            async with http.get(f"{env.url}/trajectory{query}") as resp:
                body = await resp.read()
                more = resp.headers.get("AgentEnv-Trajectory-Has-More") == "true"
                after = resp.headers.get("AgentEnv-Trajectory-Last-Id")
            lines += [line for line in body.splitlines() if line.strip()]
            if not more or not after:
                return b"\n".join(lines) + (b"\n" if lines else b"")
