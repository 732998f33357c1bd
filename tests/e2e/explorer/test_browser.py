"""The explorer in a real browser: Debian's Chromium driven by Playwright (never Playwright's own
browser download, which cannot work here; ``.ci/chromium.sh`` installs the package).

One state root for the module: a real ``agent-env run hello``, an agent run with a transcript
(the model-agent trajectory shape, its prompt holding ``<script>``), a failed run, a running one
and 2,000 filler runs written through the document store; then ``agent-env up --port 0`` as a
subprocess, and the browser opens the URL it printed.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NoReturn

import pytest

from agent_env.evals.groups import Group, GroupStore, Slot
from agent_env.stores.sqlite import SqliteDocumentStore

CHROMIUM = os.environ.get("AGENTENV_CHROMIUM", "/usr/bin/chromium")
AGENT_RUN = "@local/demo/agents/ask-0000agent"
FAILED_RUN = "@local/demo/agents/ask-0000fail"
LIVE_RUN = "@local/demo/agents/ask-0000live"
SHOT_RUN = "@local/demo/web/add-0000shot"
SHOT_KEY = "runs/demo/prompt_agent_trajectories/prompt_id=ask/trajectory-agent.json"
GROUP = "evalrun-browser1"
SLOTS = tuple(Slot(index=i, task_id=f"@local/demo/eval/task-{i // 2}", task_version=1,
                   sample=i % 2) for i in range(4))
EVAL = Group(group_id=GROUP, kind="eval", subject_id="@local/demo/eval", subject_version=1, k=2,
             slots=SLOTS)
#: two finished runs of one eval, a model each: the leaderboard, the plots and the comparison
BOARD = "@local/demo/board"
BOARD_TASKS = [f"@local/demo/board/t{i}" for i in range(6)]
BOARD_PASSES = {"evalrun-boardbig": [2, 2, 2, 1, 2, 1], "evalrun-boardsml": [1, 0, 2, 0, 0, 1]}


def record(instance_id: str, **changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "_id": instance_id, "instance_id": instance_id, "task_id": "@local/demo/agents/ask",
        "task_version": 1, "status": "completed", "started_at_utc": "2020-02-01T10:00:00.000000Z",
        "finished_at_utc": "2020-02-01T10:00:02.000000Z", "outcome": "passed",
        "scores": {"answer": 1.0}, "completed_steps": ["deploy", "ask", "answer"],
        "failures": [], "retried_failures": [], "cancel_reason": None, "duration_seconds": 2.0,
        "context": {"agents": {"agent": {"agent": "model-agent", "model": "scripted:echo"}},
                    "outputs": {}, "metadata": {}},
        "step_timings": [
            {"step_id": "deploy", "started_at_utc": "2020-02-01T10:00:00.000000Z",
             "duration_seconds": 1.2, "outcome": "completed"},
            {"step_id": "ask", "started_at_utc": "2020-02-01T10:00:01.200000Z",
             "duration_seconds": 0.6, "outcome": "completed"},
            {"step_id": "answer", "started_at_utc": "2020-02-01T10:00:01.800000Z",
             "duration_seconds": 0.2, "outcome": "completed"}],
    }
    base.update(changes)
    return base


def trajectory(reply: str) -> list[dict[str, Any]]:
    """A model-agent trajectory (``agentenv-model-agent/1``) as the agents plugin stores it."""
    return [
        {"type": "agentenv.format", "format": "agentenv-model-agent/1"},
        {"type": "prompt", "model": "scripted:echo", "text": "Say <script>window.pwned=1</script>"},
        {"type": "tools", "tools": ["echo"]},
        {"type": "model_call", "model": "scripted:echo", "finish_reason": "tool_calls",
         "text": None, "tool_calls": ["echo"], "usage": {"input": 45, "output": 5}},
        {"type": "tool_call", "server": "echo", "tool": "echo", "arguments": {"text": "hi"},
         "result": "hi", "is_error": False},
        {"type": "answer", "text": reply},
    ]


def png(width: int, height: int, rgb: tuple[int, int, int]) -> bytes:
    """A one-colour PNG, made with the standard library (what a browser screenshot is)."""
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))

    rows = b"".join(b"\x00" + bytes(rgb) * width for _ in range(height))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2,
                                                              0, 0, 0))
            + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


def _skip_or_fail(message: str) -> NoReturn:
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"{message}; browser tests never skip under CI=true (.ci/chromium.sh)")
    pytest.skip(message)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    root = tmp_path_factory.mktemp("explorer-e2e")
    state = root / "state"
    env = {**os.environ, "AGENT_ENV_STATE_DIR": str(state), "NO_COLOR": "1"}
    env.pop("AGENT_ENV_CONFIG", None)
    agent_env = [sys.executable, "-m", "agent_env"]
    hello = subprocess.run([*agent_env, "run", "hello"], cwd=root, env=env, text=True,
                           capture_output=True, timeout=120)
    assert hello.returncode == 0, hello.stdout + hello.stderr
    documents = SqliteDocumentStore(state / "documents.sqlite3")
    for i in range(2000):
        documents.insert("task_instances", record(
            f"@local/demo/bulk/task-{i:06d}", task_id="@local/demo/bulk/task",
            started_at_utc=f"2020-01-01T00:{i // 60 % 60:02d}:{i % 60:02d}.000000Z"))
    steps = {"ask": {"agent_name": "agent", "duration_seconds": 0.2,
                     "trajectory": trajectory("hi")}}
    documents.insert("task_instances", record(AGENT_RUN, context={
        "agents": {"agent": {"agent": "model-agent", "model": "scripted:echo"}},
        "envs": {"@local/demo/books": {
            "network_policy": "open",
            "env_state": {"type": "local_postgres", "instance_id": None}}},
        "outputs": steps, "metadata": {"verifications": {"answer": {"score": 1.0, "results": [
            {"result": True, "criterion": "says hi", "justification": "'hi' is in the reply"}]}}}},
        sandboxes=[{"name": "env-books", "provider": "docker", "sandbox_id": "c0ffee",
                    "passed_over": ["daytona: daytona could not create sandbox "
                                    "agentenv-vm-env-books-1a2b3c: quota exhausted"]}]))
    other = {"ask": {"agent_name": "agent", "trajectory": trajectory("bye")}}
    documents.insert("task_instances", record(
        FAILED_RUN, outcome="failed", scores={"answer": 0.0},
        started_at_utc="2020-02-01T09:00:00.000000Z", completed_steps=["deploy", "ask"],
        failures=[{"step_id": "answer", "step_type": "verify", "error": "no 'hi' in the reply",
                   "error_type": "StepError", "started_at_utc": "2020-02-01T09:00:01Z",
                   "duration_seconds": 0.1, "is_fatal": True, "is_infra": False}],
        context={"agents": {}, "outputs": other, "metadata": {}}))
    documents.insert("task_instances", record(
        LIVE_RUN, status="running", outcome=None, finished_at_utc=None, completed_steps=["deploy"],
        started_at_utc="2020-02-01T08:00:00.000000Z", task_id="@local/demo/live/task"))
    # a browser run whose transcript is a stored object holding a screenshot
    import base64
    import json

    from agent_env.stores.filesystem import FilesystemObjectStore

    shot = base64.b64encode(png(64, 40, (30, 120, 200))).decode()
    stored = [{"type": "agentenv.format", "format": "agentenv-model-agent/1"},
              {"type": "tool_call", "server": "todo", "tool": "browser_take_screenshot",
               "arguments": {}, "result": "### Result\n[image/png image, kept in the transcript]",
               "is_error": False, "images": [{"mime_type": "image/png", "data": shot},
                                             {"mime_type": "text/html", "data": "PHNjcmlwdD4="}]},
              {"type": "answer", "text": "added"}]
    FilesystemObjectStore(state / "objects").put(SHOT_KEY, json.dumps(stored).encode(),
                                                 content_type="application/json")
    documents.insert("task_instances", record(
        SHOT_RUN, task_id="@local/demo/web/add", started_at_utc="2020-02-01T07:00:00.000000Z",
        context={"agents": {}, "metadata": {}, "outputs": {"ask": {
            "agent_name": "agent", "agent_trajectory_object_key": SHOT_KEY}}}))
    groups = GroupStore(documents)
    from agent_env.evals.stats import RunSummary

    for group_id, passes in BOARD_PASSES.items():  # finished with their numbers: no records
        model = "big" if group_id.endswith("big") else "small"
        slots = tuple(Slot(index=i * 2 + s, task_id=t, task_version=1, sample=s)
                      for i, t in enumerate(BOARD_TASKS) for s in range(2))
        board = Group(group_id=group_id, kind="eval", subject_id=BOARD, subject_version=1,
                      k=2, slots=slots)
        groups.create(board)
        for slot in slots:
            passed = slot.sample < passes[slot.index // 2]
            outcome = "passed" if passed else "failed"
            groups.claim(board, slot)
            groups.finish(board, slot, f"{BOARD}/{group_id}-{slot.index}", outcome, [],
                          RunSummary(slot.task_id, 1, outcome, "model-agent", model,
                                     1.0 if passed else 0.0, 1.0 + slot.index,
                                     110 + slot.index, 0.001 * (slot.index + 1)))
    # an eval run half done: 2 of 4 runs finished
    groups.create(EVAL)
    for slot, outcome in zip(SLOTS[:2], ("passed", "error"), strict=True):
        groups.claim(EVAL, slot)
        groups.finish(EVAL, slot, AGENT_RUN, outcome, [])
    documents.close()

    process = subprocess.Popen([*agent_env, "up", "--port", "0"], cwd=root, env=env, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert process.stdout is not None
    line = process.stdout.readline()
    found = re.search(r"Explorer: (http://127\.0\.0\.1:\d+/\?token=\S+)", line)
    if found is None:
        process.kill()
        pytest.fail(f"agent-env up printed {line!r}; stderr: {process.stderr.read()}")  # type: ignore[union-attr]
    yield found.group(1), state
    process.terminate()
    process.wait(timeout=10)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _skip_or_fail("playwright is not installed (./dev setup installs the explorer's "
                      "test extra)")
    if not shutil.which(CHROMIUM):
        _skip_or_fail(f"no Chromium at {CHROMIUM} (run `bash .ci/chromium.sh`)")
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser: Any, server: tuple[str, Path]) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 760})
    opened = context.new_page()
    opened.set_default_timeout(10_000)
    errors: list[str] = []
    opened.on("pageerror", lambda exc: errors.append(str(exc)))
    yield opened
    context.close()
    assert not errors, errors


def shoot(page: Any, name: str) -> None:
    """With AGENTENV_SCREENSHOTS=DIR, keep what the test sees (the README's pictures)."""
    folder = os.environ.get("AGENTENV_SCREENSHOTS")
    if folder:
        page.screenshot(path=str(Path(folder) / f"{name}.png"))


def open_runs(page: Any, server: tuple[str, Path]) -> None:
    page.goto(server[0])
    page.wait_for_selector("#runs tbody tr")


def test_the_printed_url_shows_the_runs_newest_first(
    page: Any, server: tuple[str, Path],
) -> None:
    open_runs(page, server)
    assert "token=" not in page.url  # the token moved into a cookie
    rows = page.locator("#runs tbody tr")
    assert rows.count() == 50
    text = page.inner_text("#runs")
    assert "hello" in rows.nth(0).inner_text()  # the real run happened last: it is on top
    assert "passed" in rows.nth(0).inner_text()
    assert AGENT_RUN in text and "model-agent, scripted:echo" in text
    assert "2005 runs" in page.inner_text("#count")
    shoot(page, "runs")
    page.click("text=older »")
    page.wait_for_function("() => document.querySelector('#count').textContent.includes('51-100')")


def test_a_run_step_by_step_with_its_transcript_escaped(
    page: Any, server: tuple[str, Path],
) -> None:
    open_runs(page, server)
    page.click(f"a:text-is('{AGENT_RUN}')")
    page.wait_for_selector("#steps")
    assert "#/run/" in page.url
    assert page.locator("#steps tbody tr").count() == 3
    assert "score 1" in page.inner_text("#steps") and "says hi" in page.inner_text("#steps")
    transcript = page.inner_text(".transcript")
    assert "tool echo.echo({\"text\":\"hi\"})" in transcript and "→ hi" in transcript
    assert "tokens in 45 out 5" in transcript and "final reply\nhi" in transcript
    assert "<script>window.pwned=1</script>" in transcript  # shown as text ...
    assert page.evaluate("window.pwned") is None  # ... never run
    shoot(page, "run")
    page.reload()  # the URL is stable: the same run opens again
    page.wait_for_selector("#steps")
    assert AGENT_RUN in page.inner_text("#run-head")
    # which network policy and env state each env had
    assert "env @local/demo/books: network open · env state local_postgres" in page.inner_text(
        "#run-head")
    # which provider served each sandbox, and the one of its chain passed over
    assert ("sandbox env-books: docker (passed over: daytona: daytona could not create sandbox "
            "agentenv-vm-env-books-1a2b3c: quota exhausted)") in page.inner_text("#run-head")


def test_filters_and_the_failed_runs_error(page: Any, server: tuple[str, Path]) -> None:
    open_runs(page, server)
    page.select_option("select[name=outcome]", "failed")
    page.click("button:text('Filter')")
    page.wait_for_function(
        "() => document.querySelector('#count').textContent.startsWith('1 runs')")
    rows = page.locator("#runs tbody tr")
    assert rows.count() == 1
    assert "StepError: no 'hi' in the reply" in rows.nth(0).inner_text()
    page.fill("input[name=task_id]", "@local/demo/bulk/task")
    page.select_option("select[name=outcome]", "")
    page.click("button:text('Filter')")
    page.wait_for_function(
        "() => document.querySelector('#count').textContent.startsWith('2000 runs')")
    assert "task_id=%40local%2Fdemo%2Fbulk%2Ftask" in page.url


def test_two_runs_compared_where_they_diverge(page: Any, server: tuple[str, Path]) -> None:
    open_runs(page, server)
    page.check(f"input[aria-label='select {AGENT_RUN}']")
    page.check(f"input[aria-label='select {FAILED_RUN}']")
    page.click("#compare")
    page.wait_for_selector("#divergence")
    assert "diverge at event 6" in page.inner_text("#divergence")
    assert page.locator(".diverge").count() == 2  # the two final replies
    shoot(page, "compare")


def test_a_running_run_changes_status_live(page: Any, server: tuple[str, Path]) -> None:
    page.goto(server[0] + "#/runs?task_id=%40local%2Fdemo%2Flive%2Ftask")
    page.wait_for_selector("#runs tbody tr td.status-running")
    documents = SqliteDocumentStore(server[1] / "documents.sqlite3")
    try:
        documents.update("task_instances", {"_id": LIVE_RUN}, {"$set": {
            "status": "completed", "outcome": "passed", "completed_steps": ["deploy", "ask"]}})
    finally:
        documents.close()
    page.wait_for_selector("#runs tbody tr td.status-completed", timeout=8000)
    assert "passed" in page.inner_text("#runs tbody tr")


def test_run_a_task_again_from_its_run_page(page: Any, server: tuple[str, Path]) -> None:
    open_runs(page, server)
    page.locator("#runs tbody tr").nth(0).locator("a").click()  # the real hello run
    page.wait_for_selector("#run-again")
    page.click("#run-again")  # POST /tasks/{id}/run starts `agent-env task run`
    page.wait_for_function("() => location.hash.startsWith('#/runs?task_id=')")
    page.wait_for_function(
        "() => document.querySelector('#count') && "
        "document.querySelector('#count').textContent.startsWith('2 runs') && "
        "!document.querySelector('td.status-running')", timeout=30_000)
    assert page.locator("#runs td.outcome-passed").count() == 2


def test_an_eval_matrix_fills_in_live(page: Any, server: tuple[str, Path]) -> None:
    open_runs(page, server)
    page.click("#nav-groups")
    page.click(f"a:text-is('{GROUP}')")
    page.wait_for_selector("#matrix")
    assert "2/4 runs done" in page.inner_text("#group-progress")
    first = page.locator("#matrix tbody tr").nth(0).inner_text()
    assert "passed" in first and "error" in first and "1/1" in first  # the error counted apart
    documents = SqliteDocumentStore(server[1] / "documents.sqlite3")
    try:
        groups = GroupStore(documents)
        for slot in SLOTS[2:]:
            groups.claim(EVAL, slot)
            groups.finish(EVAL, slot, FAILED_RUN, "failed", [])
    finally:
        documents.close()
    page.wait_for_function(
        "() => document.querySelector('#group-progress').textContent.includes('complete')",
        timeout=8000)  # the server's stream sends a snapshot every 2 s
    second = page.locator("#matrix tbody tr").nth(1).inner_text()
    assert "failed" in second and "0/2" in second and "0.00" in second
    shoot(page, "eval-matrix")
    page.locator("#matrix tbody tr").nth(1).locator("a", has_text="failed").first.click()
    page.wait_for_selector("#run-head")
    assert FAILED_RUN in page.inner_text("#run-head")


def test_without_the_token_nothing_is_served(browser: Any, server: tuple[str, Path]) -> None:
    context = browser.new_context()
    try:
        anonymous = context.new_page()
        base = server[0].split("?")[0]
        response = anonymous.goto(base)
        assert response.status == 401
        assert "token" in anonymous.inner_text("body")
        api = anonymous.goto(base + "api/v1/task-instances")
        assert api.status == 401
    finally:
        context.close()


def test_a_new_run_appears_at_once_through_run_events(
        page: Any, server: tuple[str, Path]) -> None:
    """No running row on the newest page: the page's fallback timer is 10 s, so a new run
    showing within 4 s came through the run events (hook -> explorer -> event stream)."""
    open_runs(page, server)
    page.wait_for_selector("body.live")
    before = int(page.inner_text("#count").split()[0])
    env = {**os.environ, "AGENT_ENV_STATE_DIR": str(server[1]), "NO_COLOR": "1"}
    env.pop("AGENT_ENV_CONFIG", None)
    done = subprocess.run([sys.executable, "-m", "agent_env", "run", "hello"], env=env,
                          text=True, capture_output=True, timeout=120, cwd=server[1].parent)
    assert done.returncode == 0, done.stderr
    finished = time.monotonic()
    page.wait_for_function(
        f"() => document.querySelector('#count').textContent.startsWith('{before + 1} runs')",
        timeout=4000)
    assert time.monotonic() - finished < 4


def test_a_runs_steps_show_when_they_ran(page: Any, server: tuple[str, Path]) -> None:
    open_runs(page, server)
    page.locator("#runs tbody tr").nth(0).locator("a").click()  # a real hello run
    page.wait_for_selector("#steps td.timeline .bar")
    assert page.locator("#steps td.timeline .bar.completed").count() == 3
    rows = page.locator("#steps tbody tr")
    assert [rows.nth(i).get_attribute("data-step") for i in range(3)] == ["box", "load", "hello"]
    width = page.evaluate("parseFloat(document.querySelector('#steps .bar').style.width)")
    assert 0 < width <= 100


def test_a_page_on_another_port_cannot_start_runs(browser: Any, server: tuple[str, Path]) -> None:
    """Issue 31, class 2: a logged-in browser (the cookie is sent to every port of the host)
    opens a page that another local process serves; its no-cors POST and its form post are
    refused, and so is a same-page POST without the CSRF token."""
    import http.server
    import json as jsonlib
    import threading
    import urllib.parse
    import urllib.request

    base = server[0].split("?")[0].rstrip("/")
    token = server[0].split("token=")[1]
    listing = urllib.request.Request(base + "/api/v1/task-instances?limit=1",
                                     headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(listing, timeout=10) as answer:
        task_id = jsonlib.loads(answer.read())["items"][0]["task_id"]
    target = f"{base}/api/v1/tasks/{urllib.parse.quote(task_id, safe='')}/run"
    evil = f"""<!doctype html><html><body>
<form id="f" method="POST" action="{target}" enctype="text/plain" target="sink">
<input name='{{"version":1,"x":"' value='"}}'></form><iframe name="sink"></iframe>
<script>
fetch("{target}", {{method: "POST", mode: "no-cors", credentials: "include",
  headers: {{"Content-Type": "text/plain"}}, body: "{{}}"}}).then(() => {{
  document.getElementById("f").submit(); }});
</script></body></html>""".encode()

    class Evil(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.end_headers()
            self.wfile.write(evil)

        def log_message(self, *args: Any) -> None:
            pass

    attacker = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Evil)
    threading.Thread(target=attacker.serve_forever, daemon=True).start()
    context = browser.new_context()
    try:
        page = context.new_page()
        page.goto(server[0])  # logged in: the token is now a cookie
        page.wait_for_selector("#runs tbody tr")
        statuses: list[int] = []
        page.on("response", lambda r: statuses.append(r.status) if "/run" in r.url else None)
        page.goto(f"http://127.0.0.1:{attacker.server_address[1]}/")
        page.wait_for_function("() => true")
        deadline = time.monotonic() + 10
        while len(statuses) < 2 and time.monotonic() < deadline:
            page.wait_for_timeout(100)
        assert statuses == [403, 403]
        page.goto(server[0])
        page.wait_for_selector("#runs tbody tr")
        own = page.evaluate(f"""async () => (await fetch("{target}", {{method: "POST",
            credentials: "same-origin", headers: {{"Content-Type": "application/json"}},
            body: "{{}}"}})).status""")
        assert own == 403  # the explorer's own origin, but no CSRF token: refused too
    finally:
        context.close()
        attacker.shutdown()


def test_a_stored_transcript_shows_its_screenshots_as_images(
    page: Any, server: tuple[str, Path],
) -> None:
    page.goto(server[0] + "#/run/" + SHOT_RUN.replace("/", "%2F").replace("@", "%40"))
    page.wait_for_selector(".stored-transcript .transcript img.shot")
    shots = page.locator(".transcript img.shot")
    assert shots.count() == 1  # the text/html "image" is not shown
    # the browser decoded it: a real picture of the stored size, not a broken icon
    assert shots.nth(0).evaluate("img => [img.complete, img.naturalWidth, img.naturalHeight]") \
        == [True, 64, 40]
    assert "tool todo.browser_take_screenshot" in page.inner_text(".stored-transcript")
    shoot(page, "screenshot")


def test_an_eval_leaderboard_sorts_both_ways_filters_and_exports(
        page: Any, server: tuple[str, Path]) -> None:
    page.goto(server[0] + "#/leaderboard/" + BOARD.replace("/", "%2F").replace("@", "%40"))
    page.wait_for_selector("#leaderboard tr.board-row")

    def models() -> list[str]:
        return page.locator('#leaderboard td[data-key="model"]').all_inner_texts()

    def column(key: str) -> list[str]:
        return page.locator(f'#leaderboard td[data-key="{key}"]').all_inner_texts()

    assert models() == ["big", "small"]  # best pass@1 first
    # the numbers the API gives: pass@1 is the mean over tasks of each task's pass rate
    assert column("pass@1") == ["0.833", "0.333"]
    assert column("runs") == ["12", "12"]
    shoot(page, "leaderboard")
    page.click('th[data-key="pass@1"]')  # the same column again: ascending
    assert models() == ["small", "big"]
    assert page.get_attribute('th[data-key="pass@1"]', "aria-sort") == "ascending"
    page.click('th[data-key="cost_per_run"]')  # another column: descending first
    assert page.get_attribute('th[data-key="cost_per_run"]', "aria-sort") == "descending"
    page.fill("#board-filter", "sma")
    assert models() == ["small"]
    exported = page.request.get(server[0].split("/?")[0]
                                + (page.get_attribute("#board-csv", "href") or ""))
    assert exported.ok
    lines = exported.text().strip().splitlines()
    assert lines[0].startswith("agent,model,runs,errors,tasks,pass@1,pass@2,mean_score")
    assert lines[1].startswith("model-agent,big,12,0,6,0.83,1.00,0.83")


def test_a_groups_plots_draw_the_numbers_the_api_gives(page: Any,
                                                       server: tuple[str, Path]) -> None:
    page.goto(server[0] + "#/group/evalrun-boardbig")
    page.wait_for_selector("#plot-passk circle.point")
    plotted = page.locator("#plot-passk circle.point").evaluate_all(
        "cs => cs.map(c => [c.dataset.k, Number(c.dataset.value)])")
    api = page.request.get(server[0].split("/?")[0] + "/api/v1/run-groups/evalrun-boardbig/plots")
    assert api.ok
    (curve,) = api.json()["pass_at_k"]
    assert plotted == [[str(p["k"]), p["value"]] for p in curve["points"]]
    assert [round(v, 4) for _, v in plotted] == [0.8333, 1.0]
    # a dot per task and score that occurred: 4 tasks passed twice, 2 passed once of two
    assert page.locator("#plot-scores circle.point").count() == 8
    import bisect

    from agent_env.evals.stats import COST_EDGES

    costs: dict[int, int] = {}
    for index in range(12):  # what the fixture's runs cost
        bucket = bisect.bisect_right(COST_EDGES, 0.001 * (index + 1))
        costs[bucket] = costs.get(bucket, 0) + 1
    bars = page.locator("#plot-cost_usd rect.bar").evaluate_all(
        "rs => rs.map(r => Number(r.dataset.value))")
    assert bars == [costs[b] for b in sorted(costs)]
    page.click("#plot-passk summary")  # the numbers, one click away
    assert page.locator("#plot-passk table.numbers tbody tr").count() == 2
    assert page.get_attribute("#plot-passk a.csv", "href").startswith("data:text/csv")
    shoot(page, "group-plots")


def test_two_runs_compared_with_the_interval_eval_report_prints(
        page: Any, server: tuple[str, Path]) -> None:
    import json

    state = server[1]
    printed = subprocess.run(
        [sys.executable, "-m", "agent_env", "eval", "report", "--compare", "evalrun-boardbig",
         "evalrun-boardsml", "--format", "json"],
        env={**os.environ, "AGENT_ENV_STATE_DIR": str(state)}, text=True, capture_output=True,
        timeout=60, check=True)
    cli = json.loads(printed.stdout)
    page.goto(server[0] + "#/groups")
    page.check('tr[data-id="evalrun-boardbig"] input[type=checkbox]')
    page.check('tr[data-id="evalrun-boardsml"] input[type=checkbox]')
    page.click("#compare-groups")
    page.wait_for_selector("#comparison")
    shown = page.locator("#comparison tbody tr").first
    diff = cli["pass@1_difference"]
    assert shown.locator("td.difference").inner_text() == f"+{diff['difference']:.4f}"
    assert shown.locator("td.ci-low").inner_text() == f"{diff['ci_low']:+.4f}"
    assert shown.locator("td.ci-high").inner_text() == f"{diff['ci_high']:+.4f}"
    assert page.inner_text("#statement") == cli["statement"]
    assert page.inner_text("#better-in-a div") == ", ".join(cli["better_in_a"])
    assert page.locator("#interval line.ci").count() == 1
    shoot(page, "compare-groups")


def test_the_runs_list_plots_outcomes_over_time_with_its_filters(
        page: Any, server: tuple[str, Path]) -> None:
    page.goto(server[0] + "#/runs?task_id=%40local%2Fdemo%2Fbulk%2Ftask")
    page.wait_for_selector("#plot-outcomes rect.bar")
    bars = page.locator("#plot-outcomes rect.bar").evaluate_all(
        "rs => rs.map(r => [r.dataset.day, r.dataset.outcome, Number(r.dataset.value)])")
    assert bars == [["2020-01-01", "passed", 2000]]  # the 2,000 filler runs, all on that day
    page.click("#plot-outcomes summary")
    last = page.locator("#plot-outcomes table.numbers tbody tr").last.inner_text()
    assert last.split("\t")[:2] == ["2020-01-01", "2000"]
    shoot(page, "runs-over-time")
