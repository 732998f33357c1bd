"""The explorer's API on aiohttp's test client over the real local stores (SQLite, filesystem),
seeded with 20,000 run records: paging, filters, sorting, entity routes, objects and the access
checks (token, Host, cross-site, sizes, bad parameters)."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from agent_env.evals.groups import Group, GroupStore, Slot
from agent_env.stores.filesystem import FilesystemObjectStore
from agent_env.stores.sqlite import SqliteDocumentStore
from agent_env.stores.versioned import VersionedStore
from agentenv_explorer.app import COOKIE, AgentRow, Explorer, create_app

RUNS = 20_000
TOKEN = "test-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
TASKS = [f"@local/demo/suite/task-{n}" for n in range(20)]
OUTCOMES = ["passed", "failed", "error", "passed"]


def run_document(i: int) -> dict[str, Any]:
    task = TASKS[i % len(TASKS)]
    outcome = OUTCOMES[i % len(OUTCOMES)]
    failures = [] if outcome == "passed" else [{
        "step_id": "check", "step_type": "verify_sandbox", "error": f"mismatch {i}",
        "error_type": "StepError", "started_at_utc": "2026-01-01T00:00:00Z",
        "duration_seconds": 0.5, "is_fatal": True, "is_infra": outcome == "error",
        # a failure of AgentEnv's own (its message says it all) on the errored runs
        "plain": outcome == "error"}]
    return {
        "_id": f"{task}-{i:08d}", "instance_id": f"{task}-{i:08d}", "task_id": task,
        "task_version": 1, "status": "completed" if i % 100 else "running",
        "started_at_utc":
            f"2026-01-{1 + i // 1000:02d}T{(i // 60) % 24:02d}:{i % 60:02d}:00.{i:06d}Z",
        "finished_at_utc": None, "outcome": outcome if i % 100 else None,
        "scores": {"check": 1.0 if outcome == "passed" else 0.0},
        "completed_steps": ["box", "check"], "failures": failures, "retried_failures": [],
        "context": {"agents": {"agent": {"agent": "model-agent", "model": f"model-{i % 3}"}}},
        # what StoredInstances writes beside the context, for the agent and model filters
        "agents": "model-agent", "models": f"model-{i % 3}",
        "eval_id": "smoke" if i % 10 == 0 else None,
        "run_group_id": f"evalrun-{i % 4}" if i % 10 == 0 else None,
        "cancel_reason": None, "duration_seconds": 1.0 + i % 7,
    }


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, Any, Any]]:
    root: Path = tmp_path_factory.mktemp("explorer-stores")
    documents = SqliteDocumentStore(root / "documents.sqlite3", synchronous="OFF")
    for i in range(RUNS):
        documents.insert("task_instances", run_document(i))
    versioned = VersionedStore(documents)
    for task in TASKS:
        versioned.put("tasks", task, {"label": task, "steps": [{"id": "box"}, {"id": "check"}]})
    versioned.put("tasks", TASKS[0], {"label": "v2", "steps": [{"id": "box"}]})
    objects = FilesystemObjectStore(root / "objects", fsync=False)
    objects.put("runs/x/trajectory-agent.json", b'[{"type": "answer", "text": "hi"}]',
                content_type="application/json")
    objects.put("runs/x/page.html", b"<script>alert(1)</script>", content_type="text/html")
    yield documents, versioned, objects
    documents.close()


@pytest.fixture
async def client(stores: tuple[Any, Any, Any]) -> AsyncIterator[TestClient[Any, Any]]:
    documents, versioned, objects = stores
    explorer = Explorer(documents=documents, versioned=versioned, objects=objects, token=TOKEN,
                        agents=lambda: [AgentRow("model-agent", (), "agents")])
    # snapshots every 50 ms instead of 2 s, so the stream test takes no time
    async with TestClient(TestServer(create_app(explorer, stream_interval=0.05))) as test_client:
        yield test_client


def eval_group(documents: Any, group_id: str, outcomes: dict[int, str]) -> tuple[Any, Any]:
    """A real run group (the kernel's GroupStore) of 2 tasks x 3 samples, some slots done."""
    slots = tuple(Slot(index=i, task_id=TASKS[i // 3], task_version=1, sample=i % 3)
                  for i in range(6))
    group = Group(group_id=group_id, kind="eval", subject_id="@local/demo/eval", subject_version=1,
                  k=3, slots=slots)
    store = GroupStore(documents)
    store.create(group)
    for index, outcome in outcomes.items():
        assert store.claim(group, slots[index]).state == "mine"
        store.finish(group, slots[index], f"{TASKS[index // 3]}-{index:08d}", outcome, [])
    return store, group


async def get_json(client: TestClient[Any, Any], path: str, status: int = 200) -> Any:
    response = await client.get(path, headers=AUTH)
    assert response.status == status, await response.text()
    assert response.content_type == "application/json"
    return await response.json()


async def test_a_page_of_50_among_20000_runs_is_fast_and_newest_first(
    client: TestClient[Any, Any],
) -> None:
    await get_json(client, "/api/v1/task-instances?limit=50")  # warm the connection
    timings = []
    for offset in (0, 50, 10_000):
        start = time.perf_counter()
        body = await get_json(client, f"/api/v1/task-instances?limit=50&offset={offset}")
        timings.append((time.perf_counter() - start) * 1000)
        assert len(body["items"]) == 50 and body["total"] == RUNS and body["has_more"]
    print(f"\nrun list page of 50 among {RUNS}: " + ", ".join(f"{t:.1f} ms" for t in timings))
    assert max(timings) < 500, timings  # measured about 20-40 ms here; generous on shared CI
    first = (await get_json(client, "/api/v1/task-instances?limit=3"))["items"]
    starts = [r["started_at_utc"] for r in first]
    assert starts == sorted(starts, reverse=True)
    assert first[0]["instance_id"].endswith(f"{RUNS - 1:08d}")
    last = await get_json(client, f"/api/v1/task-instances?limit=50&offset={RUNS - 10}")
    assert len(last["items"]) == 10 and not last["has_more"]


async def test_filters_combine_on_the_server(client: TestClient[Any, Any]) -> None:
    task = TASKS[1]
    body = await get_json(client, f"/api/v1/task-instances?task_id={task}&outcome=failed"
                                  "&status=completed&limit=500")
    assert body["total"] == sum(
        1 for i in range(RUNS)
        if i % 20 == 1 and OUTCOMES[i % 4] == "failed" and i % 100)
    assert all(r["task_id"] == task and r["outcome"] == "failed" for r in body["items"])
    assert body["items"][0]["error"].startswith("StepError: mismatch")
    errored = await get_json(client, f"/api/v1/task-instances?task_id={TASKS[2]}&outcome=error")
    assert errored["items"][0]["error"].startswith("mismatch ")  # plain: no error type
    assert body["items"][0]["models"] and body["items"][0]["agents"] == ["model-agent"]
    running = await get_json(client, "/api/v1/task-instances?status=running&limit=5")
    assert running["total"] == RUNS // 100
    window = await get_json(client, "/api/v1/task-instances?since=2026-01-20T00:00:00Z"
                                    "&until=2026-01-21T00:00:00Z")
    assert window["total"] == 1000
    by_task = await get_json(client, f"/api/v1/tasks/{task.replace('/', '%2F')}/instances")
    assert by_task["total"] == RUNS // 20


async def test_sorting_by_duration_ascending(client: TestClient[Any, Any]) -> None:
    body = await get_json(client, "/api/v1/task-instances?sort_by=duration_seconds"
                                  "&descending=false&limit=5")
    assert [r["duration_seconds"] for r in body["items"]] == [1.0] * 5


async def test_one_run_and_its_progress(client: TestClient[Any, Any]) -> None:
    run_id = f"{TASKS[0]}-{120:08d}"
    quoted = run_id.replace("/", "%2F")
    run = await get_json(client, f"/api/v1/task-instances/{quoted}")
    assert run["instance_id"] == run_id and run["failures"] == [] and "_id" not in run
    task = TASKS[0].replace("/", "%2F")
    same = await get_json(client, f"/api/v1/tasks/{task}/instances/{quoted}")
    assert same == run
    progress = await get_json(client, f"/api/v1/tasks/{task}/instances/{quoted}/progress")
    assert progress["done"] and progress["current_step"] == "check"
    assert progress["total_steps"] == 2
    other = TASKS[1].replace("/", "%2F")
    await get_json(client, f"/api/v1/tasks/{other}/instances/{quoted}", 404)
    missing = await get_json(client, "/api/v1/task-instances/nope-123", 404)
    assert "nope-123" in missing["error"]


async def test_tasks_list_get_and_versions(client: TestClient[Any, Any]) -> None:
    body = await get_json(client, "/api/v1/tasks?limit=5")
    assert body["total"] == len(TASKS) and body["has_more"] and len(body["items"]) == 5
    first = body["items"][0]
    assert first["id"] == TASKS[0] and first["version"] == 2  # the latest version per id
    quoted = TASKS[0].replace("/", "%2F")
    old = await get_json(client, f"/api/v1/tasks/{quoted}?version=1")
    assert old["body"]["label"] == TASKS[0]
    versions = await get_json(client, f"/api/v1/tasks/{quoted}/versions")
    assert [v["version"] for v in versions["items"]] == [1, 2]
    await get_json(client, "/api/v1/tasks/%40local%2Fnone", 404)
    assert (await get_json(client, "/api/v1/evals"))["total"] == 0
    agents = await get_json(client, "/api/v1/agents")
    assert [a["id"] for a in agents["items"]] == ["model-agent"]
    await get_json(client, "/api/v1/agents/nobody", 404)


async def test_stored_objects_only_from_the_configured_store(
    client: TestClient[Any, Any],
) -> None:
    response = await client.get(
        "/api/v1/objects/content?object_url=runs/x/trajectory-agent.json", headers=AUTH)
    assert response.status == 200 and await response.json() == [{"type": "answer", "text": "hi"}]
    html = await client.get("/api/v1/objects/content?object_url=runs/x/page.html", headers=AUTH)
    assert html.headers["Content-Security-Policy"] == "sandbox"  # never runs as the page
    meta = await get_json(client, "/api/v1/objects/metadata?object_url=runs/x/page.html")
    assert meta == {"size_bytes": 25, "content_type": "text/html"}
    for bad, status in (("file:///etc/passwd", 403), ("/etc/passwd", 403),
                        ("../../etc/passwd", 400), ("runs/none", 404)):
        body = await get_json(client, f"/api/v1/objects/content?object_url={bad}", status)
        assert body["status"] == status


async def test_malformed_parameters_name_the_parameter(client: TestClient[Any, Any]) -> None:
    for query, name in (("limit=lots", "limit"), ("limit=501", "limit"), ("offset=-1", "offset"),
                        ("sort_by=secret", "sort_by"), ("descending=maybe", "descending"),
                        ("since=yesterday", "since"), ("colour=red", "colour")):
        body = await get_json(client, f"/api/v1/task-instances?{query}", 400)
        assert f"'{name}'" in body["error"], body
    assert (await get_json(client, "/api/v1/no-such-route", 404))["status"] == 404


async def test_every_route_needs_the_token(client: TestClient[Any, Any]) -> None:
    for path in ("/", "/api/v1/health", "/api/v1/task-instances", "/static/app.js"):
        response = await client.get(path)
        assert response.status == 401, path
        assert "token" in (await response.json())["error"]
    wrong = await client.get("/api/v1/health", headers={"Authorization": "Bearer wrong"})
    assert wrong.status == 401
    # the printed URL's ?token= opens the page and leaves an HttpOnly cookie for the API calls
    page = await client.get(f"/?token={TOKEN}")
    assert page.status == 200 and "AgentEnv explorer" in await page.text()
    assert page.cookies[COOKIE]["httponly"]
    assert page.headers["X-Frame-Options"] == "DENY"
    assert "default-src 'self'" in page.headers["Content-Security-Policy"]
    after = await client.get("/api/v1/health")  # the client keeps the cookie
    assert after.status == 200 and (await after.json())["status"] == "ok"


async def test_host_cross_site_and_size_checks(client: TestClient[Any, Any]) -> None:
    rebinding = await client.get("/api/v1/health", headers={**AUTH, "Host": "evil.example"})
    assert rebinding.status == 421
    assert (await client.get("/api/v1/health", headers={**AUTH, "Host": "localhost:1"})).status \
        == 200
    cross = await client.get("/api/v1/health", headers={
        **AUTH, "Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"})
    assert cross.status == 403
    same = await client.get("/api/v1/health", headers={**AUTH, "Sec-Fetch-Site": "same-origin"})
    assert same.status == 200
    big = await client.post("/api/v1/tasks/x/run", headers=AUTH, data=b"x" * (2 * 1024 * 1024))
    assert big.status == 413


async def test_a_state_change_needs_our_full_origin_and_the_csrf_token(
        client: TestClient[Any, Any]) -> None:
    """Issue 31, class 2: another port of the same host is another origin, and a cookie alone
    (which browsers send to every port) never changes state."""
    from agentenv_explorer.app import CSRF_HEADER, csrf_token

    await client.get(f"/?token={TOKEN}")  # the cookie, as a logged-in browser has it
    port = client.server.port
    task = TASKS[0].replace("/", "%2F")
    url = f"/api/v1/tasks/{task}/run"
    csrf = {CSRF_HEADER: csrf_token(TOKEN)}
    for origin in (f"http://127.0.0.1:{port + 1}", f"https://127.0.0.1:{port}",
                   "http://127.0.0.1", "null"):
        refused = await client.post(url, json={"version": 9}, headers={**csrf, "Origin": origin})
        assert refused.status == 403, origin
        assert "cross-origin" in (await refused.json())["error"]
    other_port = await client.get("/api/v1/health", headers={"Sec-Fetch-Site": "same-site"})
    assert other_port.status == 403  # a no-cors read from another port of this host
    no_csrf = await client.post(url, json={"version": 9},
                                headers={"Origin": f"http://127.0.0.1:{port}"})
    assert no_csrf.status == 403 and CSRF_HEADER in (await no_csrf.json())["error"]
    wrong = await client.post(url, json={"version": 9}, headers={CSRF_HEADER: "0" * 64})
    assert wrong.status == 403
    form = await client.post(url, data={"version": "9"}, headers=csrf)
    assert form.status == 415, await form.text()  # a simple (form) body never changes state
    ours = await client.post(url, json={"version": 9},
                             headers={**csrf, "Origin": f"http://127.0.0.1:{port}"})
    assert ours.status == 404  # past every check: the task has no version 9
    page = await client.get("/")
    assert f'content="{csrf_token(TOKEN)}"' in await page.text()


async def test_starting_a_run_checks_its_request_first(client: TestClient[Any, Any]) -> None:
    task = TASKS[0].replace("/", "%2F")
    for body, status, words in (
        ({"colour": "red"}, 400, "unknown field 'colour'"),
        ({"version": "two"}, 400, "'version'"),
        ({"version": 9}, 404, "version 9"),
        ({"version": 10**23}, 400, "'version' must be a version number"),  # issue 31, class 16
        ({"version": True}, 400, "'version' must be a version number"),
        ([1, 2], 400, "JSON object"),
    ):
        response = await client.post(f"/api/v1/tasks/{task}/run", json=body, headers=AUTH)
        assert response.status == status, await response.text()
        assert words in (await response.json())["error"]
    missing = await client.post("/api/v1/tasks/%40local%2Fnone/run", json={}, headers=AUTH)
    assert missing.status == 404
    cross = await client.post(f"/api/v1/tasks/{task}/run", json={}, headers={
        **AUTH, "Origin": "https://evil.example"})
    assert cross.status == 403  # another site's page cannot start runs with the cookie


async def test_an_eval_run_group_as_a_pass_at_k_matrix(
    client: TestClient[Any, Any], stores: tuple[Any, Any, Any],
) -> None:
    eval_group(stores[0], "evalrun-matrix01", {0: "passed", 1: "failed", 2: "error",
                                               3: "passed", 4: "passed", 5: "passed"})
    listed = await get_json(client, "/api/v1/run-groups?kind=eval")
    assert any(g["run_group_id"] == "evalrun-matrix01" and g["total"] == 6
               for g in listed["items"])
    by_subject = await get_json(client, "/api/v1/tasks/%40local%2Fdemo%2Feval/run-groups")
    assert [g["run_group_id"] for g in by_subject["items"]] == ["evalrun-matrix01"]
    group = await get_json(client, "/api/v1/run-groups/evalrun-matrix01")
    assert group["complete"] and group["done"] == 6
    first, second = group["tasks"]
    assert [s["outcome"] for s in first["samples"]] == ["passed", "failed", "error"]
    # the error is counted apart: 1 pass of 2 completed runs, never a 0 for the agent
    assert (first["passed"], first["completed"], first["errors"]) == (1, 2, 1)
    assert first["pass_at_1"] == 0.5 and first["pass_at_k"] is None  # 2 completed < k=3
    assert second["pass_at_1"] == 1.0 and second["pass_at_k"] == 1.0
    await get_json(client, "/api/v1/run-groups/evalrun-nothere", 404)


async def test_runs_per_day_by_outcome_with_the_lists_filters(
    client: TestClient[Any, Any],
) -> None:
    import time

    started = time.perf_counter()
    data = await get_json(client, "/api/v1/task-instances/outcomes")  # 30 days, 20,000 runs
    took = time.perf_counter() - started
    assert len(data["days"]) == 30 and data["days"][-1]["day"] == "2026-01-20"
    assert data["days"][-1]["counts"] == {"passed": 490, "scored below 1": 0, "unscored": 0,
                                          "failed": 250, "error": 250, "cancelled": 0}
    assert data["days"][0]["counts"]["passed"] == 0  # 2025-12-22: before the first run
    assert took < 2.0, took  # one indexed count per day and outcome, whatever the run count
    task = await get_json(client, "/api/v1/task-instances/outcomes?days=2&task_id="
                                  "%40local%2Fdemo%2Fsuite%2Ftask-0")
    assert [d["counts"]["passed"] for d in task["days"]] == [40, 40]
    failed = await get_json(client, "/api/v1/task-instances/outcomes?days=1&outcome=failed")
    assert failed["outcomes"] == ["failed"] and failed["days"][0]["counts"] == {"failed": 250}
    upto = await get_json(client, "/api/v1/task-instances/outcomes?days=1&until=2026-01-05")
    assert upto["days"][0]["day"] == "2026-01-04" and upto["days"][0]["counts"]["passed"] == 490
    noon = await get_json(client, "/api/v1/task-instances/outcomes?days=1"
                                  "&until=2026-01-05T12:00:00Z")
    assert noon["days"][0]["day"] == "2026-01-05"
    assert 0 < noon["days"][0]["counts"]["passed"] < 490  # the day cut at noon
    none = await get_json(client, "/api/v1/task-instances/outcomes?task_id=nothing")
    assert none == {"days": [], "outcomes": list(none["outcomes"])}
    await get_json(client, "/api/v1/task-instances/outcomes?since=yesterday", 400)


async def test_a_big_groups_matrix_comes_a_page_of_tasks_at_a_time(
    client: TestClient[Any, Any], stores: tuple[Any, Any, Any],
) -> None:
    slots = tuple(Slot(index=i, task_id=f"@local/demo/wide/t{i:03d}", task_version=1, sample=0)
                  for i in range(250))
    group = Group(group_id="evalrun-wide01", kind="eval", subject_id="@local/demo/wide",
                  subject_version=1, k=1, slots=slots)
    store = GroupStore(stores[0])
    store.create(group)
    for slot in slots[:240]:
        store.claim(group, slot)
        store.finish(group, slot, f"wide-{slot.index}", "passed", [])
    first = await get_json(client, "/api/v1/run-groups/evalrun-wide01")
    assert (first["tasks_total"], len(first["tasks"]), first["done"]) == (250, 100, 240)
    assert first["tasks"][0]["task_id"] == "@local/demo/wide/t000" and not first["complete"]
    last = await get_json(client, "/api/v1/run-groups/evalrun-wide01?tasks_offset=200")
    assert len(last["tasks"]) == 50 and last["tasks"][0]["task_id"] == "@local/demo/wide/t200"
    assert [t["passed"] for t in last["tasks"][38:42]] == [1, 1, 0, 0]  # t238, t239 done


async def test_plots_leaderboard_and_comparison_routes_say_what_they_cannot(
    client: TestClient[Any, Any], stores: tuple[Any, Any, Any],
) -> None:
    eval_group(stores[0], "evalrun-plots01", {0: "passed", 1: "error"})
    plots = await get_json(client, "/api/v1/run-groups/evalrun-plots01/plots")
    # one slot's instance record is stored (its agent and model are read), the other's is not
    # (it counts as "-"): the runs still count, without numbers
    assert (plots["errors"], plots["runs"]) == (1, 2)
    curves = {c["series"]: [p["value"] for p in c["points"]] for c in plots["pass_at_k"]}
    assert curves == {"model-agent · model-0": [1.0], "- · -": []}  # only an error: no point
    assert sum(plots["histograms"]["seconds"]["counts"]) == 1  # the stored record's time
    missing = await get_json(client, "/api/v1/run-groups/evalrun-nothere/plots", 404)
    assert missing["error"] == "no run group 'evalrun-nothere'"
    await get_json(client, "/api/v1/run-groups/evalrun-plots01/compare/evalrun-nothere", 404)
    itself = await get_json(client,
                            "/api/v1/run-groups/evalrun-plots01/compare/evalrun-plots01")
    assert itself["pass@1_difference"]["difference"] == 0.0
    board = await get_json(client, "/api/v1/evals/%40local%2Fdemo%2Feval/leaderboard")
    assert board["run_groups"] >= 1  # with the module's other groups of this eval
    assert sum(r["runs"] for r in board["rows"]) >= 1 and board["rows"][0]["pass@1"] == 1.0
    empty = await get_json(client, "/api/v1/evals/%40local%2Fnone/leaderboard")
    assert (empty["rows"], empty["run_groups"]) == ([], 0)
    bad = await get_json(client, "/api/v1/evals/%40local%2Fnone/leaderboard?format=xml", 400)
    assert bad["error"] == "format is json, csv or md"


async def test_a_run_group_streams_snapshots_until_it_completes(
    client: TestClient[Any, Any], stores: tuple[Any, Any, Any],
) -> None:
    store, group = eval_group(stores[0], "evalrun-stream01", {0: "passed"})
    response = await client.get("/api/v1/run-groups/evalrun-stream01/stream", headers=AUTH)
    assert response.status == 200 and response.content_type == "text/event-stream"
    events: list[str] = []
    done_seen: list[int] = []
    async for raw in response.content:
        line = raw.decode().strip()
        if line.startswith("event: "):
            events.append(line[7:])
        elif line.startswith("data: ") and events[-1] == "snapshot":
            done_seen.append(json.loads(line[6:])["done"])
            if len(done_seen) == 1:  # the rest of the group finishes while the stream is open
                for slot in group.slots[1:]:
                    store.claim(group, slot)
                    store.finish(group, slot, "x", "passed", [])
        if events and events[-1] == "complete":
            break
    assert done_seen[0] == 1 and done_seen[-1] == 6
    assert events[-1] == "complete"
    gone = await client.get("/api/v1/run-groups/evalrun-gone/stream", headers=AUTH)
    assert "event: not_found" in await gone.text()


async def test_runs_filter_by_agent_and_model(client: TestClient[Any, Any]) -> None:
    body = await get_json(client, "/api/v1/task-instances?model=model-1&limit=5")
    assert body["total"] == sum(1 for i in range(RUNS) if i % 3 == 1)
    assert all(r["models"] == ["model-1"] for r in body["items"])
    both = await get_json(client, "/api/v1/task-instances?agent=model-agent&model=model-2"
                                  f"&task_id={TASKS[2]}&limit=5")
    assert both["total"] == sum(1 for i in range(RUNS) if i % 3 == 2 and i % 20 == 2)
    none = await get_json(client, "/api/v1/task-instances?agent=claude-code")
    assert none["total"] == 0 and none["items"] == []
    evals = await get_json(client, "/api/v1/task-instances?eval=smoke&limit=5")
    assert evals["total"] == RUNS // 10 and evals["items"][0]["eval_id"] == "smoke"
    group = await get_json(client, "/api/v1/task-instances?run_group=evalrun-2&limit=5")
    assert group["total"] == sum(1 for i in range(RUNS) if i % 10 == 0 and i % 4 == 2)


async def test_posted_run_events_reach_every_listening_page(
        client: TestClient[Any, Any]) -> None:
    """The live stream: what the explorer plugin's run-event hook posts, each page gets, as
    server-sent events, in order."""
    pages = [await client.get("/api/v1/events/stream", headers=AUTH) for _ in range(2)]
    for page in pages:
        assert page.status == 200 and page.content_type == "text/event-stream"
        assert await page.content.readline() == b"event: ready\n"
        await page.content.readline()  # data: {}
        await page.content.readline()  # blank line
    events = [{"kind": "run_started", "instance_id": "i-1", "task_id": "t",
               "timestamp_utc": "2026-12-04T00:00:00Z"},
              {"kind": "step_finished", "instance_id": "i-1", "task_id": "t", "step_id": "s",
               "outcome": "completed", "duration_seconds": 0.25, "detail": {"ignored": 1}}]
    for event in events:
        posted = await client.post("/api/v1/events", json=event, headers=AUTH)
        assert posted.status == 204
    for page in pages:
        got = []
        while len(got) < 2:
            line = (await page.content.readline()).decode()
            if line.startswith("data: "):
                got.append(json.loads(line[6:]))
        assert [(e["kind"], e["instance_id"]) for e in got] == [("run_started", "i-1"),
                                                               ("step_finished", "i-1")]
        assert got[1]["duration_seconds"] == 0.25 and "detail" not in got[1]
        page.close()


@pytest.mark.parametrize(("body", "status", "error"), [
    ({"kind": "nope", "instance_id": "i", "task_id": "t"}, 400, "needs 'kind'"),
    ({"kind": "run_started", "task_id": "t"}, 400, "needs 'instance_id'"),
    ([1, 2], 400, "needs 'kind'"),
])
async def test_bad_run_events_are_refused(client: TestClient[Any, Any], body: Any, status: int,
                                          error: str) -> None:
    response = await client.post("/api/v1/events", json=body, headers=AUTH)
    assert response.status == status and error in (await response.json())["error"]
    anonymous = await client.post("/api/v1/events", json={"kind": "run_started"})
    assert anonymous.status == 401
