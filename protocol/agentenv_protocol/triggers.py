"""triggers/v1 on the gateway: an env event or a virtual time fires actions.

Why: a task author scripts the world around the agent (a colleague answers the email the agent
sent, a deadline passes at 17:00 virtual time, a tool goes away once it has been used) without
a model deciding when. The gateway sees every tool call and keeps the clock, so it detects;
what a trigger does then is a list of actions run in order.

A trigger is ``{id, when, actions}`` (the reference's keys, a subset of its forms):

* ``when: {type: "action", tool, roles?, where?, repeat?}``: after a call of ``tool`` that did
  not fail, made by a watched role (``roles``, else the registration's ``watch_roles``, else
  any role but an executor's), whose ``where`` predicates (``{"args.to": {"regex": ...}}``,
  ``equals`` or ``exists``) hold. ``repeat: true`` re-arms it after each firing.
* ``when: {type: "time", at}``: once the env's virtual clock (the wall clock while it is not
  armed) reaches ``at``: an RFC 3339 time, or an ISO 8601 duration (``PT5M``) after the
  registration.

Actions:

* ``{type: "tool", tool, args, as?}``: the gateway calls the tool as role ``as`` (default
  ``trigger``); a call a trigger makes provokes no trigger.
* ``{type: "permission", action: "enable"|"disable", role, tools}``: a tool access rule.
* ``{type: "nl", instruction, executor?}``: a prompt for an agent. The gateway does not talk
  to agents: it queues the action, the harness claims it (``POST /triggers/next``, which
  waits up to ``wait`` seconds for one), prompts the executor agent and reports back
  (``POST /triggers/ack``). The reply is then recorded in the run like any prompt's.

``${args.x}`` and ``${result.x}`` in an instruction or a tool action's args read the provoking
call (``result`` is the structured content, or the text parsed as JSON). A trigger's status is
``armed``, ``firing``, ``queued`` (nl actions wait for the harness), then ``fired`` or
``failed``; every step of that is an event in ``GET /triggers/state``.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import itertools
import json
import re
import time
from collections.abc import Awaitable, Callable
from typing import Any

from .clock import ClockError, VirtualClock, parse_rfc3339

TRIGGERS_URI = "urn:agentenv:triggers/v1"
#: The reference's feature names for what this engine honours beyond the first release.
FEATURES = ("named_executors", "provoking_roles")
WHEN_TYPES = ("action", "time")
ACTION_TYPES = ("nl", "tool", "permission")
STATUSES = ("armed", "firing", "queued", "fired", "failed", "cancelled")
#: The role a tool action calls as unless it says ``as``.
TRIGGER_ROLE = "trigger"
_PREDICATES = ("regex", "equals", "exists")
_ACTION_KEYS = {"nl": {"type", "instruction", "executor"}, "tool": {"type", "tool", "args", "as"},
                "permission": {"type", "action", "role", "tools"}}
_VAR = re.compile(r"\$\{(args|result)\.([\w.]+)\}")
_DURATION = re.compile(r"^P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?$")
_MAX_EVENTS = 2000
_MAX_TRIGGERS = 256
#: Seconds between looks at the clock while a time trigger is armed.
TICK_SECONDS = 0.2

#: ``call(tool, args, role)``: a tool call made by the gateway for a trigger.
CallTool = Callable[[str, dict[str, Any], str], Awaitable[dict[str, Any]]]
#: ``access(body, allow)``: a tool access rule change (``/tools/enable|disable``'s body).
Access = Callable[[dict[str, Any], bool], None]


class TriggerError(ValueError):
    """A registration (or ack) the engine refuses: HTTP 400 with this message."""


def parse_duration(text: Any) -> dt.timedelta:
    """An ISO 8601 duration of days, hours, minutes and seconds (``P1D``, ``PT1H30M``)."""
    match = _DURATION.match(text) if isinstance(text, str) else None
    if match is None or text in ("P", "PT"):
        raise TriggerError(f"{text!r} is not an ISO 8601 duration such as 'PT5M' or 'P1DT2H'")
    days, hours, minutes, seconds = match.groups()
    return dt.timedelta(days=int(days or 0), hours=int(hours or 0), minutes=int(minutes or 0),
                        seconds=float(seconds or 0))


def _path(data: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        if isinstance(data, dict) and part in data:
            data = data[part]
        elif isinstance(data, list) and part.isdigit() and int(part) < len(data):
            data = data[int(part)]
        else:
            return None
    return data


def result_data(result: dict[str, Any]) -> Any:
    """What ``${result.x}`` reads: the structured content, else the first text as JSON."""
    if isinstance(result.get("structuredContent"), dict):
        return result["structuredContent"]
    for item in result.get("content") or []:
        if isinstance(item, dict) and item.get("type") == "text":
            with contextlib.suppress(ValueError, TypeError):
                return json.loads(item["text"])
            return item["text"]
    return None


def fill(value: Any, call: dict[str, Any]) -> Any:
    """``value`` with ``${args.x}``/``${result.x}`` replaced from the provoking ``call``; a
    placeholder standing alone keeps the value's type."""
    if isinstance(value, str):
        whole = _VAR.fullmatch(value)
        if whole:
            return _path(call.get(whole.group(1)), whole.group(2))
        return _VAR.sub(lambda m: _text(_path(call.get(m.group(1)), m.group(2))), value)
    if isinstance(value, dict):
        return {k: fill(v, call) for k, v in value.items()}
    if isinstance(value, list):
        return [fill(v, call) for v in value]
    return value


def _text(value: Any) -> str:
    return value if isinstance(value, str) else "" if value is None else json.dumps(value)


def predicate_problem(predicate: Any) -> str | None:
    """Why ``predicate`` is not one of ``{regex}``, ``{equals}``, ``{exists}``, or None."""
    if not isinstance(predicate, dict) or len(set(predicate) & set(_PREDICATES)) != 1:
        return f"must have exactly one of {list(_PREDICATES)}"
    if "regex" in predicate:
        try:
            re.compile(predicate["regex"])
        except (re.error, TypeError) as exc:
            return f"bad regex: {exc}"
    if "exists" in predicate and not isinstance(predicate["exists"], bool):
        return "exists must be true or false"
    return None


def holds(predicate: dict[str, Any], value: Any) -> bool:
    """Whether ``value`` meets a checked predicate (a regex searches its text)."""
    if "regex" in predicate:
        return re.search(predicate["regex"], _text(value)) is not None
    if "equals" in predicate:
        return bool(value == predicate["equals"])
    present = value not in (None, "", [], {})
    return present == bool(predicate["exists"])


class Triggers:
    """The triggers of one gateway, their statuses and the firing log."""

    def __init__(self, clock: VirtualClock, call_tool: CallTool, access: Access,
                 known_tools: Callable[[], set[str]]) -> None:
        self.clock = clock
        self._call_tool = call_tool
        self._access = access
        self._known_tools = known_tools
        self.specs: dict[str, dict[str, Any]] = {}
        self.status: dict[str, str] = {}
        self.fired_count: dict[str, int] = {}
        self.watch_roles: set[str] | None = None
        self.executors: dict[str, dict[str, Any]] = {}
        self.events: list[dict[str, Any]] = []
        self._seq = itertools.count(1)
        self._firing_ids = itertools.count(1)
        self._due: dict[str, dt.datetime] = {}
        self._queued: list[dict[str, Any]] = []
        self._waiting: dict[str, dict[str, Any]] = {}  # firing id -> its open nl actions
        self._wake = asyncio.Event()
        self._tasks: set[asyncio.Task[None]] = set()
        self._driver: asyncio.Task[None] | None = None

    @property
    def active(self) -> bool:
        """Whether a tool call can provoke anything (the hot path's one check)."""
        return any(s == "armed" and self.specs[t]["when"]["type"] == "action"
                   for t, s in self.status.items())

    # -- registration -------------------------------------------------------------------------
    def register(self, body: Any) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise TriggerError("body must be a JSON object")
        triggers = body.get("triggers")
        if not isinstance(triggers, list) or not triggers:
            raise TriggerError("triggers must be a non-empty list of trigger objects")
        executors = dict(self.executors)
        if body.get("executor") is not None:
            executors[""] = self._executor(body["executor"], "executor")
        named = body.get("executors") or {}
        if not isinstance(named, dict):
            raise TriggerError("executors must be an object keyed by executor name")
        for name, raw in named.items():
            executors[str(name)] = self._executor(raw, f"executors.{name}")
        watch = body.get("watch_roles")
        if watch is not None and (not isinstance(watch, list) or not all(
                isinstance(r, str) and r for r in watch)):
            raise TriggerError("watch_roles must be a list of role names")
        if watch is not None and self.watch_roles is not None and set(watch) != self.watch_roles:
            raise TriggerError(f"watch_roles {sorted(watch)} differs from the registered "
                               f"{sorted(self.watch_roles)}: clear the triggers to change it")
        watched = set(watch) if watch is not None else self.watch_roles
        for name, executor in executors.items():
            if watched is not None and executor["role"] in watched:
                raise TriggerError(f"executor {name or '(default)'!r} has role "
                                   f"{executor['role']!r}, which is watched: its own tool "
                                   "calls would fire triggers")
        known = self._known_tools()
        batch: dict[str, dict[str, Any]] = {}
        for index, raw in enumerate(triggers):
            spec = self._normalise(raw, index, executors, known)
            if spec["id"] in batch:
                raise TriggerError(f"trigger {spec['id']!r} is given twice")
            old = self.specs.get(spec["id"])
            if old is not None and old != spec:
                raise TriggerError(f"trigger {spec['id']!r} is already registered with another "
                                   "spec: remove it first or use a new id")
            batch[spec["id"]] = spec
        if len(set(self.specs) | set(batch)) > _MAX_TRIGGERS:
            raise TriggerError(f"at most {_MAX_TRIGGERS} triggers can be registered")
        self.executors, self.watch_roles = executors, watched
        added = [tid for tid in batch if tid not in self.specs]
        for tid in added:
            spec = self.specs[tid] = batch[tid]
            self.status[tid], self.fired_count[tid] = "armed", 0
            if spec["when"]["type"] == "time":
                self._due[tid] = self._due_at(spec["when"]["at"])
            self._emit("added", tid)
        if self._due and (self._driver is None or self._driver.done()):
            self._driver = asyncio.ensure_future(self._drive())
        return {"ok": True, "added": added, "all": list(self.specs)}

    def _executor(self, raw: Any, where: str) -> dict[str, Any]:
        if not isinstance(raw, dict) or not isinstance(raw.get("role"), str) or not raw["role"]:
            raise TriggerError(f"{where} must be an object with the executor agent's 'role' "
                               "(kept out of watch_roles so its tool calls fire nothing)")
        return {"name": str(raw.get("name") or ""), "role": raw["role"]}

    def _normalise(self, raw: Any, index: int, executors: dict[str, Any],
                   known: set[str]) -> dict[str, Any]:
        if not isinstance(raw, dict):
            raise TriggerError(f"triggers[{index}] must be an object")
        tid = raw.get("id")
        if not isinstance(tid, str) or not tid:
            raise TriggerError(f"triggers[{index}] needs a non-empty string id")
        where = f"trigger {tid!r}"
        unknown = sorted(set(raw) - {"id", "when", "actions", "description"})
        if unknown:
            raise TriggerError(f"{where}: unknown keys {unknown} (a trigger takes id, when, "
                               "actions, description)")
        when = raw.get("when")
        if not isinstance(when, dict) or when.get("type") not in WHEN_TYPES:
            raise TriggerError(f"{where}: when.type must be one of {list(WHEN_TYPES)} (this "
                               "gateway does not serve the reference's 'state' and 'website' "
                               "triggers)")
        when = dict(when)
        if when["type"] == "action":
            extra = sorted(set(when) - {"type", "tool", "roles", "where", "repeat"})
            if extra:
                raise TriggerError(f"{where}: when takes type, tool, roles, where, repeat for "
                                   f"an action trigger, not {extra}")
            if not isinstance(when.get("tool"), str) or not when["tool"]:
                raise TriggerError(f"{where}: when.tool must name the tool whose call fires it")
            if known and when["tool"] not in known:
                raise TriggerError(f"{where}: when.tool names unknown tool {when['tool']!r} "
                                   f"(the env has: {', '.join(sorted(known))})")
            roles = when.get("roles")
            if roles is not None and (not isinstance(roles, list) or not roles
                                      or not all(isinstance(r, str) and r for r in roles)):
                raise TriggerError(f"{where}: when.roles must be a non-empty list of roles")
            for field, predicate in (when.get("where") or {}).items():
                if not field.startswith(("args.", "result.")):
                    raise TriggerError(f"{where}: where.{field} must read args.<path> or "
                                       "result.<path>")
                problem = predicate_problem(predicate)
                if problem:
                    raise TriggerError(f"{where}: where.{field} {problem}")
        else:
            extra = sorted(set(when) - {"type", "at"})
            if extra:
                raise TriggerError(f"{where}: a time trigger takes 'at' only here, not {extra}")
            self._due_at(when.get("at"), where)
        actions = raw.get("actions")
        if not isinstance(actions, list) or not actions:
            raise TriggerError(f"{where}: actions must be a non-empty list")
        for number, action in enumerate(actions):
            self._check_action(action, f"{where} actions[{number}]", executors, known)
        return {"id": tid, "when": when, "actions": actions}

    @staticmethod
    def _check_action(action: Any, where: str, executors: dict[str, Any],
                      known: set[str]) -> None:
        if not isinstance(action, dict) or action.get("type") not in ACTION_TYPES:
            raise TriggerError(f"{where}: type must be one of {list(ACTION_TYPES)}")
        kind = action["type"]
        extra = sorted(set(action) - _ACTION_KEYS[kind])
        if extra:
            raise TriggerError(f"{where}: a {kind} action takes {sorted(_ACTION_KEYS[kind])}, "
                               f"not {extra} (this gateway serves no delays or verify steps)")
        if kind == "nl":
            if not isinstance(action.get("instruction"), str) or not action["instruction"]:
                raise TriggerError(f"{where}: an nl action needs an 'instruction'")
            name = action.get("executor") or ""
            if name not in executors:
                raise TriggerError(f"{where}: executor {name or '(default)'!r} is not registered"
                                   " (give the step executor_agent_name, or name a deployed "
                                   "agent)")
        elif kind == "tool":
            if not isinstance(action.get("tool"), str) or not action["tool"]:
                raise TriggerError(f"{where}: a tool action needs 'tool'")
            if known and action["tool"] not in known:
                raise TriggerError(f"{where}: unknown tool {action['tool']!r}")
            if not isinstance(action.get("args", {}), dict):
                raise TriggerError(f"{where}: args must be an object")
        else:
            if action.get("action") not in ("enable", "disable"):
                raise TriggerError(f"{where}: action must be 'enable' or 'disable'")
            tools = action.get("tools")
            if not (tools == "*" or (isinstance(tools, list)
                    and all(isinstance(t, str) for t in tools))):
                raise TriggerError(f"{where}: tools must be a list of names or '*'")

    def _now(self) -> dt.datetime:
        return self.clock.now() or dt.datetime.now(dt.UTC)

    def _due_at(self, at: Any, where: str = "time trigger") -> dt.datetime:
        if isinstance(at, str) and at.startswith("P"):
            return self._now() + parse_duration(at)
        try:
            return parse_rfc3339(at)
        except ClockError:
            raise TriggerError(f"{where}: when.at must be an RFC 3339 time or an ISO 8601 "
                               f"duration after registration, not {at!r}") from None

    def remove(self, body: Any) -> dict[str, Any]:
        ids = body.get("ids") if isinstance(body, dict) else None
        if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
            raise TriggerError("ids must be a list of trigger ids")
        removed = [tid for tid in ids if tid in self.specs]
        for tid in removed:
            self._forget(tid)
            self._emit("removed", tid)
        return {"ok": True, "removed": removed}

    def clear(self) -> dict[str, Any]:
        for tid in list(self.specs):
            self._forget(tid)
            self._emit("removed", tid)
        self.watch_roles, self.executors = None, {}
        return {"ok": True}

    def _forget(self, tid: str) -> None:
        for table in (self.specs, self.status, self.fired_count, self._due):
            table.pop(tid, None)
        self._queued = [q for q in self._queued if q["trigger_id"] != tid]

    def state(self) -> dict[str, Any]:
        return {
            "triggers": [{"id": tid, "status": self.status[tid], "when": spec["when"],
                          "fired_count": self.fired_count[tid],
                          **({"due": self._due[tid].isoformat()} if tid in self._due else {})}
                         for tid, spec in self.specs.items()],
            "watch_roles": sorted(self.watch_roles) if self.watch_roles is not None else None,
            "queued": len(self._queued), "events": self.events[-500:],
        }

    # -- detection ---------------------------------------------------------------------------
    def on_tool_call(self, role: str, tool: str, arguments: dict[str, Any],
                     result: dict[str, Any]) -> None:
        """After a tool call that reached the env: fire what it provokes."""
        if result.get("isError"):
            return
        call: dict[str, Any] | None = None
        executor_roles = {e["role"] for e in self.executors.values()}
        for tid, spec in self.specs.items():
            when = spec["when"]
            if self.status[tid] != "armed" or when["type"] != "action" or when["tool"] != tool:
                continue
            roles = when.get("roles")
            if roles is not None:
                if role not in roles:
                    continue
            elif (self.watch_roles is not None and role not in self.watch_roles) \
                    or role in executor_roles:
                continue
            if call is None:
                call = {"args": arguments, "result": result_data(result), "role": role}
            if all(holds(p, _path(call, field)) for field, p in (when.get("where") or {}).items()):
                self._start(tid, call)

    async def _drive(self) -> None:
        """Fire time triggers as the clock reaches them."""
        while self._due:
            now = self._now()
            for tid, due in list(self._due.items()):
                if now >= due and self.status.get(tid) == "armed":
                    del self._due[tid]
                    self._start(tid, {"args": {}, "result": None, "virtual_time": now.isoformat()})
            await asyncio.sleep(TICK_SECONDS)

    def _start(self, tid: str, call: dict[str, Any]) -> None:
        self.status[tid] = "firing"
        self._emit("detected", tid, role=call.get("role"))
        task = asyncio.ensure_future(self._fire(tid, call))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _fire(self, tid: str, call: dict[str, Any]) -> None:
        spec = self.specs.get(tid)
        if spec is None:
            return
        firing = f"f-{next(self._firing_ids)}"
        nl: list[dict[str, Any]] = []
        for number, action in enumerate(spec["actions"]):
            try:
                if action["type"] == "tool":
                    result = await self._call_tool(action["tool"],
                                                   fill(action.get("args") or {}, call),
                                                   action.get("as") or TRIGGER_ROLE)
                    if result.get("isError"):
                        raise TriggerError(_text(result_data(result)))
                elif action["type"] == "permission":
                    self._access({"role": action.get("role"), "tools": action["tools"]},
                                 action["action"] == "enable")
                else:
                    executor = self.executors[action.get("executor") or ""]
                    nl.append({"firing": firing, "trigger_id": tid, "action": number,
                               "executor": executor["name"], "role": executor["role"],
                               "instruction": _text(fill(action["instruction"], call))})
                    continue
            except Exception as exc:  # recorded as the action's failure
                self._emit("action_failed", tid, action=number, error=str(exc)[:500])
                self._finish(tid, ok=False)
                return
            self._emit("action_ok", tid, action=number)
        if not nl:
            self._finish(tid, ok=True)
            return
        self.status[tid] = "queued"
        self._waiting[firing] = {"trigger_id": tid, "open": {a["action"] for a in nl}}
        self._queued.extend(nl)
        self._wake.set()

    def _finish(self, tid: str, *, ok: bool) -> None:
        if tid not in self.specs:
            return
        when = self.specs[tid]["when"]
        if ok:
            self.fired_count[tid] += 1
        self._emit("fired" if ok else "failed", tid)
        # a failed action trigger waits for the next call; a time one has had its moment
        again = when["type"] == "action" and (not ok or bool(when.get("repeat")))
        self.status[tid] = "armed" if again else "fired" if ok else "failed"

    # -- the harness's side of nl actions ----------------------------------------------------
    async def next_actions(self, wait: float) -> list[dict[str, Any]]:
        """Claim the queued nl actions, waiting up to ``wait`` seconds for one."""
        deadline = time.monotonic() + max(0.0, min(wait, 30.0))
        while not self._queued:
            self._wake.clear()
            left = deadline - time.monotonic()
            if left <= 0:
                return []
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), left)
        claimed, self._queued = self._queued, []
        for action in claimed:
            self._emit("claimed", action["trigger_id"], action=action["action"])
        return claimed

    def ack(self, body: Any) -> dict[str, Any]:
        if not isinstance(body, dict) or not isinstance(body.get("firing"), str) \
                or not isinstance(body.get("action"), int) or not isinstance(body.get("ok"), bool):
            raise TriggerError("ack takes {firing, action, ok, detail?}")
        waiting = self._waiting.get(body["firing"])
        if waiting is None or body["action"] not in waiting["open"]:
            raise TriggerError(f"no open nl action {body['action']} of firing {body['firing']!r}")
        tid = waiting["trigger_id"]
        waiting["open"].discard(body["action"])
        detail = str(body.get("detail") or "")[:500]
        if not body["ok"]:
            self._emit("action_failed", tid, action=body["action"], error=detail)
            del self._waiting[body["firing"]]
            self._finish(tid, ok=False)
        else:
            self._emit("action_ok", tid, action=body["action"], detail=detail)
            if not waiting["open"]:
                del self._waiting[body["firing"]]
                self._finish(tid, ok=True)
        return {"ok": True, "status": self.status.get(tid)}

    def _emit(self, kind: str, tid: str, **fields: Any) -> None:
        event = {"seq": next(self._seq), "kind": kind, "trigger_id": tid,
                 "ts": dt.datetime.now(dt.UTC).isoformat(), **fields}
        if self.clock.armed:
            event["virtual_time"] = self.clock.now_iso()
        self.events.append(event)
        del self.events[:-_MAX_EVENTS]

    async def stop(self) -> None:
        for task in [*self._tasks, *([self._driver] if self._driver else [])]:
            task.cancel()
            with contextlib.suppress(BaseException):
                await task


def problems(triggers: Any, executors: dict[str, str]) -> list[str]:
    """What the gateway would refuse in ``triggers`` before an env is up (its tool names aside).
    ``executors`` maps executor names (``""``: the default one) to their roles."""
    if not isinstance(triggers, list) or not triggers:
        return ["triggers must be a non-empty list of trigger objects"]

    async def no_call(tool: str, arguments: dict[str, Any], role: str) -> dict[str, Any]:
        raise TriggerError("checking only")

    engine = Triggers(VirtualClock(), no_call, lambda body, allow: None, set)
    named = {name: {"name": name, "role": role} for name, role in executors.items()}
    found = []
    for index, raw in enumerate(triggers):
        try:
            engine._normalise(raw, index, named, set())
        except TriggerError as exc:
            found.append(str(exc))
    return found
