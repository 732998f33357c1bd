"""The explorer's aiohttp application: the page, and the API under ``/api/v1``.

Why it is shaped this way:

* every list is answered by the document store's own paging (``query`` with ``sort``,
  ``limit`` + 1 and ``offset``, plus ``count``), so a page of runs costs the same at 1,000 and
  at 50,000 stored runs and no route holds every run in memory; the indexes that make those
  queries seeks, not scans, are created once when the app starts (``ensure_index`` is
  idempotent);
* the routes and their JSON follow the reference explorer's (``{items, total, limit, offset,
  has_more}``, ids as one ``%2F``-encoded path segment, ``objects/content?object_url=``) for
  what this framework stores: tasks, envs, artifacts and evals (versioned entities), task
  instances (run records), agents (the installed ``a2a-agent`` contributions) and objects;
* the reference has no authentication; this server is reachable by anything on the machine,
  so every request needs the token printed with the URL (``?token=``, then a cookie, or
  ``Authorization: Bearer``), and the Host and cross-site checks (421, 403) stop DNS-rebinding
  and other sites' pages from using a logged-in browser;
* store calls block, so they run in worker threads (the SQLite store keeps one connection per
  thread);
* live updates come from the runs themselves: this plugin's ``agent_env_run_event`` hook, in
  the process running a task, posts each run event to every explorer up on the machine
  (:mod:`agentenv_explorer.live`), and ``/api/v1/events/stream`` passes them on to the pages
  as server-sent events, so a page redraws when something happened, not on a timer.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import attrs
from aiohttp import web

from agent_env.api import MAX_VERSION, failure_line
from agentenv_explorer.live import LIVE_KINDS

from . import inbox
from .http import MAX_BODY, api_error, blocking, json_body

API = "/api/v1"
INSTANCES = "task_instances"
ENTITY_KINDS = ("tasks", "envs", "artifacts", "evals")
COOKIE = "agentenv_explorer_token"
STATIC = Path(__file__).parent / "static"
#: the reference's page size rules: 50 by default, at most 500
DEFAULT_LIMIT, MAX_LIMIT = 50, 500
#: request bodies are small JSON; anything larger is refused with 413
LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})
RUN_SORTS = ("started_at_utc", "finished_at_utc", "duration_seconds", "task_id", "status",
             "outcome")
RUN_FILTERS = ("task_id", "status", "outcome")
#: query parameter -> the record's top-level field: the run's agent ids and models, sorted and
#: comma-joined (a run of one agent is found by its id; a run of two by ``a,b``), and the eval
#: and run group it ran in
RUN_LIST_FILTERS = {"agent": "agents", "model": "models", "eval": "eval_id",
                    "run_group": "run_group_id"}
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; "
                               "style-src 'self'; script-src 'self'; frame-ancestors 'none'",
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@attrs.frozen
class AgentRow:
    """An installed agent, as ``GET /agents`` lists it."""

    id: str
    aliases: tuple[str, ...]
    plugin: str


#: What a posted run event may hold (``agent_env.events.RunEvent``'s fields).
EVENT_KINDS = LIVE_KINDS
EVENT_FIELDS = ("kind", "instance_id", "task_id", "timestamp_utc", "step_id", "step_type",
                "outcome", "error", "duration_seconds")
#: events a page that reads slowly may fall behind by before the oldest are dropped
LIVE_BACKLOG = 1000
KEEPALIVE_SECONDS = 15.0


@attrs.define
class LiveEvents:
    """The pages listening for run events, each with its own queue."""

    listeners: set[asyncio.Queue[dict[str, Any] | None]] = attrs.field(factory=set)

    def publish(self, event: dict[str, Any] | None) -> None:
        """Hand ``event`` to every page (None: the server is stopping, end the streams)."""
        for queue in list(self.listeners):
            if event is not None and queue.qsize() >= LIVE_BACKLOG:
                queue.get_nowait()  # a stalled page loses its oldest event, not our memory
            queue.put_nowait(event)


@attrs.define
class Explorer:
    """What the app serves from: the stores, the installed agents and the access rules."""

    documents: Any
    versioned: Any
    objects: Any | None
    token: str
    agents: Callable[[], list[AgentRow]] = attrs.field(default=list)
    allowed_hosts: frozenset[str] = frozenset()
    allowed_origins: frozenset[str] = frozenset()
    #: runs started with ``POST /tasks/{id}/run`` that are still going, by workflow id
    children: dict[str, Any] = attrs.field(factory=dict)
    live: LiveEvents = attrs.field(factory=LiveEvents)
    #: plots and leaderboards computed from run groups' counters, by what they were computed
    #: from (the groups' counter versions): kept until a group changes
    memo: dict[Any, Any] = attrs.field(factory=dict)

    def remembered(self, key: Any, compute: Callable[[], Any]) -> Any:
        if key not in self.memo:
            if len(self.memo) >= 128:
                self.memo.pop(next(iter(self.memo)))
            self.memo[key] = compute()
        return self.memo[key]

    def prepare(self) -> None:
        """Indexes for the run list's sorts and filters (idempotent; cheap once made)."""
        for fields in (
            [("started_at_utc", -1)],
            ["task_id", ("started_at_utc", -1)],
            ["status", ("started_at_utc", -1)],
            ["outcome", ("started_at_utc", -1)],
            ["agents", ("started_at_utc", -1)],
            ["models", ("started_at_utc", -1)],
            ["eval_id", ("started_at_utc", -1)],
            ["run_group_id", ("started_at_utc", -1)],
            [("finished_at_utc", -1)],
            [("duration_seconds", -1)],
        ):
            self.documents.ensure_index(INSTANCES, fields)
        for fields in (["group", "index"], ["group", "state"]):  # a page of a run group
            self.documents.ensure_index(SLOTS, fields)


EXPLORER = web.AppKey("explorer", Explorer)
STREAM_INTERVAL = web.AppKey("stream_interval", float)


# -- query parameters -----------------------------------------------------------------------


def int_param(request: web.Request, name: str, default: int, low: int, high: int) -> int:
    raw = request.query.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise api_error(400, f"query parameter {name!r} must be an integer, not {raw!r}") from None
    if not low <= value <= high:
        raise api_error(400, f"query parameter {name!r} must be between {low} and {high}")
    return value


def bool_param(request: web.Request, name: str, default: bool) -> bool:
    raw = request.query.get(name)
    if raw is None or raw == "":
        return default
    if raw.lower() in ("true", "1", "yes"):
        return True
    if raw.lower() in ("false", "0", "no"):
        return False
    raise api_error(400, f"query parameter {name!r} must be true or false, not {raw!r}")


def page(items: list[Any], total: int, limit: int, offset: int) -> dict[str, Any]:
    """The reference's list envelope; ``items`` holds at most ``limit`` + 1 (the probe)."""
    return {"items": items[:limit], "total": total, "limit": limit, "offset": offset,
            "has_more": len(items) > limit}


# -- run records ----------------------------------------------------------------------------


def run_summary(doc: Mapping[str, Any]) -> dict[str, Any]:
    """The row the runs list shows: small, whatever the size of the run's context."""
    context = doc.get("context") or {}
    agents = context.get("agents") or {}
    failures = doc.get("failures") or []
    models = sorted({str(a.get("model")) for a in agents.values()
                     if isinstance(a, dict) and a.get("model")})
    return {
        "instance_id": doc.get("instance_id") or doc.get("_id"),
        "task_id": doc.get("task_id"),
        "task_version": doc.get("task_version"),
        "status": doc.get("status"),
        "outcome": doc.get("outcome"),
        "started_at_utc": doc.get("started_at_utc"),
        "finished_at_utc": doc.get("finished_at_utc"),
        "duration_seconds": doc.get("duration_seconds"),
        "scores": doc.get("scores") or {},
        "completed_steps": len(doc.get("completed_steps") or []),
        "failures": len(failures),
        "error": failure_text(failures[0])
        if failures and isinstance(failures[0], dict) else None,
        "agents": sorted(str(a.get("agent")) for a in agents.values()
                         if isinstance(a, dict) and a.get("agent")),
        "models": models,
        "eval_id": doc.get("eval_id"),
        "run_group_id": doc.get("run_group_id"),
    }


def run_filter(request: web.Request, task_id: str | None = None) -> dict[str, Any]:
    """The store filter for ``task_id``/``status``/``outcome``/``agent``/``model``/``since``/
    ``until``."""
    found: dict[str, Any] = {}
    for name in RUN_FILTERS:
        value = request.query.get(name)
        if value:
            values = [v for v in value.split(",") if v]
            found[name] = values[0] if len(values) == 1 else {"$in": values}
    for name, field in RUN_LIST_FILTERS.items():
        value = request.query.get(name)
        if value:
            found[field] = value
    if task_id is not None:
        found["task_id"] = task_id
    window: dict[str, str] = {}
    for name, op in (("since", "$gte"), ("until", "$lt")):
        value = request.query.get(name)
        if value:
            if not _looks_like_time(value):
                raise api_error(400, f"query parameter {name!r} must be a UTC time such as "
                                     f"2026-01-31T12:00:00Z, not {value!r}")
            window[op] = value
    if window:
        found["started_at_utc"] = window
    unknown = sorted(set(request.query) - {*RUN_FILTERS, *RUN_LIST_FILTERS, "since", "until",
                                           "limit", "offset", "sort_by", "descending",
                                           "token", "days"})
    if unknown:
        raise api_error(400, f"unknown query parameter {unknown[0]!r}")
    return found


def _looks_like_time(value: str) -> bool:
    import datetime as dt

    try:
        dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return False
    return True


async def list_runs(request: web.Request, task_id: str | None = None) -> web.Response:
    explorer: Explorer = request.app[EXPLORER]
    limit = int_param(request, "limit", DEFAULT_LIMIT, 1, MAX_LIMIT)
    offset = int_param(request, "offset", 0, 0, 10**9)
    sort_by = request.query.get("sort_by") or "started_at_utc"
    if sort_by not in RUN_SORTS:
        raise api_error(400, f"query parameter 'sort_by' must be one of {', '.join(RUN_SORTS)}")
    descending = bool_param(request, "descending", True)
    found = run_filter(request, task_id)
    sort = [(sort_by, -1 if descending else 1), ("_id", -1 if descending else 1)]

    def read() -> tuple[list[dict[str, Any]], int]:
        docs = explorer.documents.query(INSTANCES, found, sort=sort, limit=limit + 1,
                                        offset=offset)
        return [run_summary(d) for d in docs], explorer.documents.count(INSTANCES, found)

    items, total = await blocking(read)
    return web.json_response(page(items, total, limit, offset))


async def get_run_document(request: web.Request, instance_id: str) -> dict[str, Any]:
    explorer: Explorer = request.app[EXPLORER]
    doc = await blocking(explorer.documents.find_one, INSTANCES, {"_id": instance_id})
    if doc is None:
        raise api_error(404, f"no task instance {instance_id!r}")
    doc = dict(doc)
    doc.pop("_id", None)
    return doc


#: the outcomes the runs-over-time plot stacks, in its order
PLOTTED_OUTCOMES = ("passed", "scored below 1", "unscored", "failed", "error", "cancelled")


async def runs_over_time(request: web.Request) -> web.Response:
    """Runs per day by outcome (the runs list's filters apply), for the ``days`` up to the
    newest matching run's day (or ``until``): one indexed count per day and outcome, so it
    costs the same at 50,000 runs as at 50."""
    import datetime as dt

    explorer: Explorer = request.app[EXPLORER]
    days = int_param(request, "days", 30, 1, 366)
    found = run_filter(request)
    window = dict(found.pop("started_at_utc", None) or {})
    wanted = found.pop("outcome", None)
    outcomes = [o for o in PLOTTED_OUTCOMES if wanted is None or o == wanted
                or (isinstance(wanted, dict) and o in wanted.get("$in", ()))]

    def read() -> dict[str, Any]:
        if "$lt" in window:  # the day of the last moment before it
            until = dt.datetime.fromisoformat(window["$lt"].replace("Z", "+00:00"))
            end = (until - dt.timedelta(microseconds=1)).date() + dt.timedelta(days=1)
        else:
            newest = explorer.documents.query(
                INSTANCES, {**found, **({"started_at_utc": window} if window else {})},
                sort=[("started_at_utc", -1)], limit=1)
            if not newest or not newest[0].get("started_at_utc"):
                return {"days": [], "outcomes": outcomes}
            end = dt.date.fromisoformat(str(newest[0]["started_at_utc"])[:10]) \
                + dt.timedelta(days=1)
        rows = []
        for back in range(days, 0, -1):
            low, high = (end - dt.timedelta(days=back)).isoformat(), \
                (end - dt.timedelta(days=back - 1)).isoformat()
            span = {"$gte": max(low, window.get("$gte", low)),
                    "$lt": min(high, window.get("$lt", high))}
            counts = {o: explorer.documents.count(
                INSTANCES, {**found, "outcome": o, "started_at_utc": span}) for o in outcomes}
            rows.append({"day": low, "counts": counts})
        return {"days": rows, "outcomes": outcomes}

    return web.json_response(await blocking(read))


async def runs_index(request: web.Request) -> web.Response:
    return await list_runs(request)


async def task_runs(request: web.Request) -> web.Response:
    return await list_runs(request, request.match_info["id"])


async def run_get(request: web.Request) -> web.Response:
    doc = await get_run_document(request, request.match_info["iid"])
    task_id = request.match_info.get("id")
    if task_id is not None and doc.get("task_id") != task_id:
        raise api_error(404, f"task {task_id!r} has no instance {request.match_info['iid']!r}")
    return web.json_response(doc)


async def run_progress(request: web.Request) -> web.Response:
    explorer: Explorer = request.app[EXPLORER]
    doc = await get_run_document(request, request.match_info["iid"])
    steps = None
    if isinstance(doc.get("task_id"), str):
        task = await blocking(explorer.versioned.get, "tasks", doc["task_id"],
                              doc.get("task_version"))
        if task is not None and isinstance(task.body.get("steps"), list):
            steps = len(task.body["steps"])
    completed = doc.get("completed_steps") or []
    return web.json_response({
        "status": doc.get("status"),
        "current_step": completed[-1] if completed else None,
        "total_steps": steps,
        "completed_steps": completed,
        "done": doc.get("status") != "running",
    })


# -- versioned entities ---------------------------------------------------------------------


def entity_json(record: Any) -> dict[str, Any]:
    return {"id": record.id, "version": record.version,
            "created_at_utc": record.created_at_utc.isoformat(),
            "content_hash": record.content_hash, "reason": record.reason, "body": record.body}


def entity_routes(kind: str) -> list[web.RouteDef]:
    """``GET /<kind>``, ``/<kind>/{id}`` and ``/<kind>/{id}/versions`` for one entity kind."""

    async def list_entities(request: web.Request) -> web.Response:
        explorer: Explorer = request.app[EXPLORER]
        limit = int_param(request, "limit", DEFAULT_LIMIT, 1, MAX_LIMIT)
        offset = int_param(request, "offset", 0, 0, 10**9)
        descending = bool_param(request, "descending", False)
        wanted = request.query.get("id")

        def read() -> tuple[list[dict[str, Any]], int]:
            collection = "entity_" + kind
            explorer.versioned.latest_version(kind, "_")  # creates the collection's indexes
            found: dict[str, Any] = {"version": 1}
            if wanted:
                found["id"] = wanted
            firsts = explorer.documents.query(collection, found,
                                              sort=[("id", -1 if descending else 1)],
                                              limit=limit + 1, offset=offset)
            items = []
            for first in firsts:
                latest = explorer.versioned.get(kind, first["id"])
                items.append(entity_json(latest))
            return items, explorer.documents.count(collection, found)

        items, total = await blocking(read)
        return web.json_response(page(items, total, limit, offset))

    async def get_entity(request: web.Request) -> web.Response:
        explorer: Explorer = request.app[EXPLORER]
        entity_id = request.match_info["id"]
        version = int_param(request, "version", 0, 1, 10**9) or None
        record = await blocking(explorer.versioned.get, kind, entity_id, version)
        if record is None:
            what = f" version {version}" if version else ""
            raise api_error(404, f"no {kind[:-1]} {entity_id!r}{what}")
        return web.json_response(entity_json(record))

    async def versions(request: web.Request) -> web.Response:
        explorer: Explorer = request.app[EXPLORER]
        entity_id = request.match_info["id"]
        records = await blocking(explorer.versioned.list_versions, kind, entity_id)
        if not records:
            raise api_error(404, f"no {kind[:-1]} {entity_id!r}")
        return web.json_response({"items": [entity_json(r) for r in records]})

    return [
        web.get(f"{API}/{kind}", list_entities),
        web.get(f"{API}/{kind}/{{id}}", get_entity),
        web.get(f"{API}/{kind}/{{id}}/versions", versions),
    ]


# -- agents, objects, health ----------------------------------------------------------------


async def list_agents(request: web.Request) -> web.Response:
    explorer: Explorer = request.app[EXPLORER]
    limit = int_param(request, "limit", DEFAULT_LIMIT, 1, MAX_LIMIT)
    offset = int_param(request, "offset", 0, 0, 10**9)
    rows = sorted(explorer.agents(), key=lambda a: a.id)
    items = [attrs.asdict(a) for a in rows[offset:offset + limit + 1]]
    return web.json_response(page(items, len(rows), limit, offset))


async def get_agent(request: web.Request) -> web.Response:
    explorer: Explorer = request.app[EXPLORER]
    wanted = request.match_info["id"]
    for agent in explorer.agents():
        if wanted == agent.id or wanted in agent.aliases:
            return web.json_response(attrs.asdict(agent))
    raise api_error(404, f"no agent {wanted!r}")


def object_key(request: web.Request) -> str:
    """The object key of ``object_url``: a key of the configured object store, nothing else."""
    from agent_env.api import InvalidObjectKey, validate_key

    explorer: Explorer = request.app[EXPLORER]
    raw = request.query.get("object_url")
    if not raw:
        raise api_error(400, "query parameter 'object_url' is required")
    if explorer.objects is None:
        raise api_error(404, "no object store is configured")
    if "://" in raw or raw.startswith("/"):
        raise api_error(403, "object_url must be a key of the configured object store "
                             "(objects elsewhere are refused)")
    try:
        return validate_key(raw)
    except InvalidObjectKey as exc:
        raise api_error(400, f"query parameter 'object_url': {exc}") from None


async def object_metadata(request: web.Request) -> web.Response:
    from agent_env.api import ObjectNotFound

    explorer: Explorer = request.app[EXPLORER]
    key = object_key(request)
    try:
        meta = await blocking(explorer.objects.metadata, key)
    except ObjectNotFound:
        raise api_error(404, f"no object {key!r}") from None
    return web.json_response({"size_bytes": meta.size, "content_type": meta.content_type})


async def object_content(request: web.Request) -> web.Response:
    from agent_env.api import ObjectNotFound

    explorer: Explorer = request.app[EXPLORER]
    key = object_key(request)
    try:
        meta = await blocking(explorer.objects.metadata, key)
        data = await blocking(explorer.objects.get, key)
    except ObjectNotFound:
        raise api_error(404, f"no object {key!r}") from None
    # stored bytes are untrusted: never let them run as this origin's page
    return web.Response(body=data, content_type=meta.content_type or "application/octet-stream",
                        headers={"Content-Security-Policy": "sandbox"})


# -- run groups (eval runs, task run --k, run-batch) ---------------------------------------

GROUPS, SLOTS = "eval_run_groups", "eval_run_slots"
#: a run that completed (its result counts); anything else that is done is an error, counted apart
COMPLETED_OUTCOMES = frozenset({"passed", "failed", "scored below 1", "unscored"})
#: the reference's stream: a snapshot every 2 s (create_app's stream_interval), at most 600
STREAM_MAX = 600


def pass_at_k(n: int, c: int, k: int) -> float | None:
    """The kernel's unbiased pass@k (None when n < k), as the eval table shows it."""
    from agent_env.api import pass_at_k as estimate

    return estimate(n, c, k) if k >= 1 and 0 <= c <= n else None


def group_summary(doc: Mapping[str, Any]) -> dict[str, Any]:
    total = doc["total"] if "total" in doc else len(doc.get("slots") or [])
    return {"run_group_id": doc["_id"], "kind": doc.get("kind"),
            "subject_id": doc.get("subject_id"), "subject_version": doc.get("subject_version"),
            "k": doc.get("k"), "total": total}


#: Task rows of a group's matrix per page: a group of 50,000 runs shows its first 100 tasks
#: at once, not a 50,000-cell table.
TASKS_PAGE = 100


def group_matrix(doc: Mapping[str, Any], page: list[Mapping[str, Any]],
                 states: list[Mapping[str, Any]], done: int, tasks_total: int,
                 offset: int = 0) -> dict[str, Any]:
    """The group with one row per task version of ``page`` (the group's slots of a page of
    its tasks, from ``offset``): their samples' outcomes, pass@1 and pass@k. ``states`` are
    those slots' documents; ``done``, how many of the group's slots are done."""
    by_index = {int(s["index"]): s for s in states}
    k = int(doc.get("k") or 1)
    rows: dict[str, dict[str, Any]] = {}
    for slot in page:
        key = f"{slot['task_id']}@v{slot['task_version']}"
        row = rows.setdefault(key, {"task_id": slot["task_id"],
                                    "task_version": slot["task_version"], "samples": []})
        state = by_index.get(int(slot["index"]), {})
        row["samples"].append({"sample": slot.get("sample"), "index": slot["index"],
                               "state": state.get("state") or "pending",
                               "outcome": state.get("outcome"),
                               "instance_id": state.get("instance_id")})
    for row in rows.values():
        outcomes = [s["outcome"] for s in row["samples"] if s["state"] == "done"]
        n = sum(1 for o in outcomes if o in COMPLETED_OUTCOMES)
        c = sum(1 for o in outcomes if o == "passed")
        row.update(completed=n, passed=c, errors=len(outcomes) - n,
                   pass_at_1=pass_at_k(n, c, 1), pass_at_k=pass_at_k(n, c, k))
    summary = group_summary(doc)
    return {**summary, "done": done, "complete": done == summary["total"],
            "tasks": list(rows.values()), "tasks_total": tasks_total, "tasks_offset": offset}


async def list_groups(request: web.Request, subject_id: str | None = None) -> web.Response:
    explorer = request.app[EXPLORER]
    limit = int_param(request, "limit", DEFAULT_LIMIT, 1, MAX_LIMIT)
    offset = int_param(request, "offset", 0, 0, 10**9)
    found: dict[str, Any] = {}
    for name in ("kind", "subject_id"):
        if request.query.get(name):
            found[name] = request.query[name]
    if subject_id is not None:
        found["subject_id"] = subject_id

    def read() -> tuple[list[dict[str, Any]], int]:
        docs = explorer.documents.query(GROUPS, found, sort=[("_id", -1)], limit=limit + 1,
                                        offset=offset)
        return [group_summary(d) for d in docs], explorer.documents.count(GROUPS, found)

    items, total = await blocking(read)
    return web.json_response(page(items, total, limit, offset))


async def groups_index(request: web.Request) -> web.Response:
    return await list_groups(request)


async def task_groups(request: web.Request) -> web.Response:
    return await list_groups(request, request.match_info["id"])


async def read_group(explorer: Explorer, group_id: str,
                     offset: int = 0) -> dict[str, Any] | None:
    """A page of the group's matrix: its slot documents read by index range for the page's
    tasks, and the done count from the index, so a page costs the same at any group size."""
    def read() -> dict[str, Any] | None:
        # a group's slots never change once it is made: read, parsed and indexed once, kept
        # small (a summary and each task's (index, sample) pairs, not the slot documents)
        kept = explorer.memo.get(("group", group_id))
        if kept is None:
            found = explorer.documents.find_one(GROUPS, {"_id": group_id})
            if found is None:
                return None
            tasks: dict[tuple[str, int], list[tuple[int, Any]]] = {}
            for slot in found.get("slots") or []:
                tasks.setdefault((slot["task_id"], slot["task_version"]), []).append(
                    (int(slot["index"]), slot.get("sample")))
            head = {**{k: v for k, v in found.items() if k != "slots"},
                    "total": len(found.get("slots") or [])}
            kept = explorer.remembered(("group", group_id), lambda: (head, tasks))
        doc, by_task = kept
        keys = list(by_task)
        page = [{"task_id": key[0], "task_version": key[1], "index": index, "sample": sample}
                for key in keys[offset:offset + TASKS_PAGE] for index, sample in by_task[key]]
        indexes = [int(slot["index"]) for slot in page]
        states = explorer.documents.query(SLOTS, {
            "group": group_id, "index": {"$gte": min(indexes), "$lte": max(indexes)}}
        ) if indexes else []
        done = explorer.documents.count(SLOTS, {"group": group_id, "state": "done"})
        return group_matrix(doc, page, states, done, len(keys), offset)

    result: dict[str, Any] | None = await blocking(read)
    return result


async def get_group(request: web.Request) -> web.Response:
    group_id = request.match_info["gid"]
    offset = int_param(request, "tasks_offset", 0, 0, 10**9)
    found = await read_group(request.app[EXPLORER], group_id, offset)
    if found is None:
        raise api_error(404, f"no run group {group_id!r}")
    return web.json_response(found)


# -- plots, leaderboard and comparisons (the numbers ``eval report`` prints) ---------------


def _counters(explorer: Explorer, group_id: str) -> list[Any]:
    from agent_env.api import UserError, eval_group_counters

    try:
        return list(eval_group_counters(explorer.documents, group_id))
    except UserError:
        raise api_error(404, f"no run group {group_id!r}") from None


def group_plots(rows: list[Any], offset: int = 0) -> dict[str, Any]:
    """What a group's plots draw, from its counters: pass@k against k per agent x model, the
    scores of all its runs and of each task's (a page of tasks from ``offset``, as the
    matrix shows them) in tenths, and the time, tokens and cost of its runs in buckets."""
    from agent_env.api import eval_buckets, eval_histogram, eval_pass_curve

    by_pair: dict[str, list[Any]] = {}
    for row in rows:
        by_pair.setdefault(f"{row.agent} · {row.model}", []).append(row)
    curves = [{"series": name, "points": eval_pass_curve(mine)}
              for name, mine in sorted(by_pair.items())]
    per_task: dict[str, list[Any]] = {}
    for row in rows:
        per_task.setdefault(row.task_id, []).append(row)
    tasks = sorted(per_task)
    scores = [{"task_id": task, "counts": eval_histogram(per_task[task], "score")}
              for task in tasks[offset:offset + TASKS_PAGE]]
    histograms = {name: {"labels": eval_buckets(name), "counts": eval_histogram(rows, name)}
                  for name in ("seconds", "tokens", "cost_usd")}
    histograms["score"] = {"labels": eval_buckets("score"),
                           "counts": eval_histogram(rows, "score")}
    return {"pass_at_k": curves, "scores": scores, "score_labels": eval_buckets("score"),
            "tasks_total": len(tasks), "tasks_offset": offset,
            "histograms": histograms, "runs": sum(r.runs for r in rows),
            "errors": sum(r.errors for r in rows)}


async def get_group_plots(request: web.Request) -> web.Response:
    explorer = request.app[EXPLORER]
    from agent_env.api import eval_group_version

    group_id = request.match_info["gid"]
    offset = int_param(request, "tasks_offset", 0, 0, 10**9)

    def read() -> dict[str, Any]:
        version = eval_group_version(explorer.documents, group_id)
        return dict(explorer.remembered(
            ("plots", group_id, version, offset),
            lambda: group_plots(_counters(explorer, group_id), offset)))

    return web.json_response(await blocking(read))


async def compare_groups(request: web.Request) -> web.Response:
    from agent_env.api import compare_run_groups

    explorer = request.app[EXPLORER]
    a, b = request.match_info["gid"], request.match_info["other"]
    seed = int_param(request, "seed", 0, -(2**31), 2**31)
    resamples = int_param(request, "resamples", 10_000, 100, 100_000)

    def read() -> dict[str, Any]:
        result = compare_run_groups(a, _counters(explorer, a), b, _counters(explorer, b),
                                    seed=seed, resamples=resamples)
        return dict(result.to_json())

    return web.json_response(await blocking(read))


async def eval_leaderboard(request: web.Request) -> web.Response:
    from agent_env.api import eval_leaderboard as board
    from agent_env.api import eval_run_groups, render_leaderboard

    explorer = request.app[EXPLORER]
    eval_id = request.match_info["id"]
    fmt = request.query.get("format", "json")
    if fmt not in ("json", "csv", "md"):
        raise api_error(400, "format is json, csv or md")

    def read() -> tuple[list[Any], int, int]:
        from agent_env.api import eval_group_version

        groups = eval_run_groups(explorer.documents, eval_id)
        k = int_param(request, "k", max([int(d.get("k") or 1) for d in groups] or [1]), 1,
                      1000)
        versions = tuple((str(d["_id"]), eval_group_version(explorer.documents, str(d["_id"])))
                         for d in groups)
        rows = explorer.remembered(("board", eval_id, versions, k), lambda: board(
            [r for doc in groups for r in _counters(explorer, str(doc["_id"]))], k))
        return rows, k, len(groups)

    rows, k, groups = await blocking(read)
    if fmt != "json":
        return web.Response(text=render_leaderboard(rows, fmt, k) + "\n",
                            content_type="text/csv" if fmt == "csv" else "text/markdown",
                            headers={"Content-Disposition": f'attachment; filename='
                                     f'"leaderboard.{fmt}"'})
    return web.json_response({"eval_id": eval_id, "k": k, "run_groups": groups,
                              "rows": [r.to_json() for r in rows]})


async def group_stream(request: web.Request) -> web.StreamResponse:
    """Server-sent events: ``snapshot`` every 2 s, then ``complete`` (or ``not_found``,
    ``timeout``), as the reference's run-group stream."""
    explorer = request.app[EXPLORER]
    group_id = request.match_info["gid"]
    offset = int_param(request, "tasks_offset", 0, 0, 10**9)
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream",
                                           "Cache-Control": "no-cache"})
    for name, value in SECURITY_HEADERS.items():
        response.headers[name] = value
    await response.prepare(request)

    async def send(event: str, data: Any) -> None:
        await response.write(f"event: {event}\ndata: {json.dumps(data)}\n\n".encode())

    for _ in range(STREAM_MAX):
        found = await read_group(explorer, group_id, offset)
        if found is None:
            await send("not_found", {"run_group_id": group_id})
            return response
        await send("snapshot", found)
        if found["complete"]:
            await send("complete", found)
            return response
        await asyncio.sleep(request.app[STREAM_INTERVAL])
    await send("timeout", {"run_group_id": group_id})
    return response


# -- live run events ------------------------------------------------------------------------


async def post_event(request: web.Request) -> web.Response:
    """``POST /events``: one run event from a running task (this plugin's hook sends them)."""
    try:
        body = await request.json()
    except (ValueError, UnicodeDecodeError):
        raise api_error(400, "the body must be a JSON run event") from None
    if not isinstance(body, dict) or body.get("kind") not in EVENT_KINDS:
        raise api_error(400, f"a run event needs 'kind', one of {', '.join(sorted(EVENT_KINDS))}")
    for name in ("instance_id", "task_id"):
        if not isinstance(body.get(name), str) or not body[name]:
            raise api_error(400, f"a run event needs {name!r}, a string")
    request.app[EXPLORER].live.publish({k: body.get(k) for k in EVENT_FIELDS})
    return web.Response(status=204)


async def event_stream(request: web.Request) -> web.StreamResponse:
    """Server-sent events: ``ready`` once, then ``run`` for every run event posted, with a
    comment every 15 s so proxies and browsers keep the stream open."""
    live = request.app[EXPLORER].live
    queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream",
                                           "Cache-Control": "no-cache"})
    for name, value in SECURITY_HEADERS.items():
        response.headers[name] = value
    await response.prepare(request)
    live.listeners.add(queue)
    try:
        await response.write(b"event: ready\ndata: {}\n\n")
        while True:
            try:
                event = await asyncio.wait_for(queue.get(), KEEPALIVE_SECONDS)
            except TimeoutError:
                await response.write(b": keepalive\n\n")
                continue
            if event is None:
                break
            await response.write(f"event: run\ndata: {json.dumps(event)}\n\n".encode())
    except ConnectionResetError:
        pass  # the page went away
    finally:
        live.listeners.discard(queue)
    return response


# -- starting runs --------------------------------------------------------------------------

RUN_KEYS = frozenset({"version", "agent_model"})


async def start_run(request: web.Request) -> web.Response:
    """``POST /tasks/{id}/run``: start ``agent-env task run`` in a child process; answer at once.

    The run writes its own record (``running`` first), so the runs list shows it within a second
    or two; the answer carries a ``workflow_id`` (the child's handle here), not the instance id,
    which the run only picks when it starts.
    """
    import secrets
    import sys

    explorer = request.app[EXPLORER]
    task_id = request.match_info["id"]
    body = await json_body(request, RUN_KEYS)
    version = body.get("version")
    if version is not None and (isinstance(version, bool) or not isinstance(version, int)
                                or not 1 <= version <= MAX_VERSION):
        raise api_error(400, f"field 'version' must be a version number (1 to {MAX_VERSION})")
    model = body.get("agent_model")
    if model is not None and (not isinstance(model, str) or not model):
        raise api_error(400, "field 'agent_model' must be a model name")
    task = await blocking(explorer.versioned.get, "tasks", task_id, version)
    if task is None:
        raise api_error(404, f"no task {task_id!r}" + (f" version {version}" if version else ""))
    argv = [sys.executable, "-m", "agent_env", "task", "run", "--id", task_id,
            "--version", str(task.version)]
    if model:
        argv += ["--model", model]
    workflow_id = "wf-" + secrets.token_hex(6)
    process = await asyncio.create_subprocess_exec(
        *argv, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL, start_new_session=True)
    explorer.children[workflow_id] = process
    waiter = asyncio.ensure_future(process.wait())  # reaps the child when it ends
    waiter.add_done_callback(lambda _: explorer.children.pop(workflow_id, None))
    return web.json_response({"workflow_id": workflow_id, "instance_id": None,
                              "task_id": task_id, "task_version": task.version,
                              "status": "QUEUED"}, status=202)


async def health(request: web.Request) -> web.Response:
    explorer: Explorer = request.app[EXPLORER]
    return web.json_response({"status": "ok", "document_store": type(explorer.documents).__name__,
                              "runner": "local"})


async def index(request: web.Request) -> web.Response:
    """The page, with its CSRF token in a meta tag for the script to send back."""
    token = csrf_token(request.app[EXPLORER].token)
    page = (STATIC / "index.html").read_text(encoding="utf-8").replace(
        '<meta name="agentenv-csrf" content="">',
        f'<meta name="agentenv-csrf" content="{token}">')
    return web.Response(text=page, content_type="text/html",
                        headers={"Cache-Control": "no-store"})


async def not_found(request: web.Request) -> web.Response:
    raise api_error(404, f"no route {request.path}")


# -- access checks --------------------------------------------------------------------------


def _host_of(value: str) -> str:
    host = urlsplit("//" + value).hostname or ""
    return host.lower()


#: the header the explorer's own page sends with every state change (see :func:`csrf_token`)
CSRF_HEADER = "X-AgentEnv-CSRF"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_DEFAULT_PORTS = {"http": 80, "https": 443}


def csrf_token(token: str) -> str:
    """The value of :data:`CSRF_HEADER`: derived from the access token, so nothing more is
    stored, and handed only to the explorer's own page (a page of another origin, another port
    of this host included, cannot read it; a custom header also forces a CORS preflight,
    which this server never grants)."""
    return hmac.new(token.encode(), b"agentenv-explorer-csrf", hashlib.sha256).hexdigest()


def _origin_key(scheme: str, netloc: str) -> tuple[str, str, int] | None:
    """(scheme, host, port) with the scheme's default port filled in; None when unparsable."""
    try:
        parts = urlsplit(f"{scheme}://{netloc}")
        port = parts.port
    except ValueError:
        return None
    scheme = scheme.lower()
    if not parts.hostname or scheme not in _DEFAULT_PORTS:
        return None
    return scheme, parts.hostname.lower(), port or _DEFAULT_PORTS[scheme]


def same_origin(origin: str, request: web.Request) -> bool:
    """Whether ``origin`` is this server's own: scheme, host and port all equal (browsers
    send cookies to every port of a host, so the host alone proves nothing)."""
    parts = urlsplit(origin)
    given = _origin_key(parts.scheme, parts.netloc)
    return given is not None and given == _origin_key(request.scheme,
                                                       request.headers.get("Host", ""))


@web.middleware
async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Host check (421), token (401), cross-origin and CSRF (403), size (413), headers."""
    explorer: Explorer = request.app[EXPLORER]
    host = _host_of(request.headers.get("Host", ""))
    if host not in LOOPBACK and host not in explorer.allowed_hosts:
        raise api_error(421, f"Host {host!r} is not served here (add it with --allow-host)")
    given = request.query.get("token")
    supplied = given or request.cookies.get(COOKIE) or ""
    auth = request.headers.get("Authorization", "")
    bearer = auth.lower().startswith("bearer ")
    if bearer:
        supplied = auth[7:].strip()
    if not supplied or not hmac.compare_digest(supplied.encode(), explorer.token.encode()):
        raise api_error(401, "a valid token is required: open the URL `agent-env up` printed, "
                             "or send Authorization: Bearer <token>")
    changes = request.method not in SAFE_METHODS
    if request.path.startswith(API) or changes:
        site = request.headers.get("Sec-Fetch-Site", "")
        origin = request.headers.get("Origin")
        allowed = origin is not None and (same_origin(origin, request)
                                          or origin in explorer.allowed_origins)
        if not allowed and (site in ("cross-site", "same-site") or (origin and changes)):
            raise api_error(403, "cross-origin requests are refused: the explorer answers "
                                 "its own page only (scheme, host and port)")
    if changes and not bearer:
        # a cookie alone never changes state: the page proves it is ours with the CSRF token
        sent = request.headers.get(CSRF_HEADER, "").encode("utf-8", "replace")
        if not hmac.compare_digest(sent, csrf_token(explorer.token).encode()):
            raise api_error(403, f"a state change needs the {CSRF_HEADER} header the "
                                 "explorer's page sends, or Authorization: Bearer <token>")
    if request.content_length is not None and request.content_length > MAX_BODY:
        raise api_error(413, f"the request body is larger than {MAX_BODY} bytes")
    if changes and request.body_exists and request.content_type != "application/json":
        raise api_error(415, "a request body must be JSON (Content-Type: application/json)")
    response = await handler(request)
    if given and request.method == "GET" and not response.prepared:
        response.set_cookie(COOKIE, given, httponly=True, samesite="Strict", path="/")
    return response


@web.middleware
async def headers(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        response = await handler(request)
    except web.HTTPException as exc:
        if exc.content_type != "application/json":
            exc = api_error(exc.status, exc.reason)
        response = exc
    for name, value in SECURITY_HEADERS.items():
        response.headers.setdefault(name, value)
    if isinstance(response, web.HTTPException):
        raise response
    return response


def create_app(explorer: Explorer, stream_interval: float = 2.0) -> web.Application:
    """The application serving ``explorer``'s stores (used by ``up`` and the tests)."""
    explorer.prepare()
    app = web.Application(middlewares=[headers, guard], client_max_size=MAX_BODY)
    app[EXPLORER] = explorer
    app[inbox.DOCUMENTS] = explorer.documents
    app[STREAM_INTERVAL] = stream_interval
    routes = [
        web.get("/", index),
        web.get(f"{API}/health", health),
        web.get(f"{API}/task-instances", runs_index),
        web.get(f"{API}/task-instances/outcomes", runs_over_time),
        web.get(f"{API}/task-instances/{{iid}}", run_get),
        web.get(f"{API}/tasks/{{id}}/instances", task_runs),
        web.get(f"{API}/tasks/{{id}}/runs", task_runs),
        web.get(f"{API}/tasks/{{id}}/instances/{{iid}}", run_get),
        web.get(f"{API}/tasks/{{id}}/instances/{{iid}}/progress", run_progress),
        web.post(f"{API}/tasks/{{id}}/run", start_run),
        web.get(f"{API}/tasks/{{id}}/run-groups", task_groups),
        web.get(f"{API}/run-groups", groups_index),
        web.get(f"{API}/run-groups/{{gid}}", get_group),
        web.get(f"{API}/run-groups/{{gid}}/stream", group_stream),
        web.get(f"{API}/run-groups/{{gid}}/plots", get_group_plots),
        web.get(f"{API}/run-groups/{{gid}}/compare/{{other}}", compare_groups),
        web.get(f"{API}/evals/{{id}}/leaderboard", eval_leaderboard),
        web.get(f"{API}/agents", list_agents),
        web.get(f"{API}/agents/{{id}}", get_agent),
        web.get(f"{API}/objects/content", object_content),
        web.get(f"{API}/objects/metadata", object_metadata),
        web.post(f"{API}/events", post_event),
        web.get(f"{API}/events/stream", event_stream),
    ]
    for kind in ENTITY_KINDS:
        routes.extend(entity_routes(kind))
    routes.extend(inbox.routes(API))
    app.add_routes(routes)
    app.router.add_static("/static/", STATIC, show_index=False)

    async def end_streams(app: web.Application) -> None:  # else a stop waits for open pages
        app[EXPLORER].live.publish(None)

    app.on_shutdown.append(end_streams)
    app.router.add_route("*", API + "/{tail:.*}", not_found)
    return app


def failure_text(failure: dict[str, Any]) -> str:
    """A recorded step failure (the stored dict) as the CLI shows it."""
    return failure_line(str(failure.get("error_type")), str(failure.get("error") or ""),
                        plain=bool(failure.get("plain")))
