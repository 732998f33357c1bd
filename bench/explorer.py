"""The explorer: runs-list latency at 1,000 and 50,000 stored runs, and ``agent-env up`` start.

Each store is seeded directly with run records shaped like the ones ``agent-env run`` writes
(a context with agents and outputs, about 1.5 KB each), in a SQLite file of its own; the app is
served in this process on a loopback port and asked over HTTP, as the page asks it. Figures are
the median of single requests:

* the first page of the runs list (50 rows, newest first), a filtered page (status), and a
  page deep in the list (offset 10,000 at 50,000 runs; the same offset share at 1,000);
* ``agent-env up`` start to its first answer (``/api/v1/health``), a subprocess on an empty
  state folder;
* in Chromium (Playwright driving Debian's ``chromium``, as the browser tests do), the page's
  first contentful paint and the time until the runs table shows, served by ``agent-env up``
  over the 50,000-run store. Without a browser here these two are left out, said in a note.

The bar is issue 16's: at 50,000 runs a page costs at most 2x what it costs at 1,000 (paging in
the store, no scan), and a page stays under 200 ms.

The eval page (issue 42): a run group of 1,000 and of 50,000 finished runs (10 samples per task,
finished through the kernel's ``GroupStore`` so its counters are kept as a real eval run keeps
them), reached in Chromium from the loaded explorer by its link (``#/group/<id>``): the time
until its pass@k plot and the first row of its matrix show. The bar: at most 300 ms at 50,000
runs.
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

from bench.bars import Bar
from bench.measure import Series

SMALL, LARGE = 1_000, 50_000
TASKS = 40
_FIRST_SMALL = f"explorer runs page 1, {SMALL:,} runs"
_FIRST_LARGE = f"explorer runs page 1, {LARGE:,} runs"
_FILTER_SMALL = f"explorer runs filtered page, {SMALL:,} runs"
_FILTER_LARGE = f"explorer runs filtered page, {LARGE:,} runs"
_DEEP_SMALL = f"explorer runs deep page, {SMALL:,} runs"
_DEEP_LARGE = f"explorer runs deep page, {LARGE:,} runs"
_EVAL_SMALL = f"explorer eval page to plots and matrix shown, {SMALL:,} runs"
_EVAL_LARGE = f"explorer eval page to plots and matrix shown, {LARGE:,} runs"
SAMPLES = 10
BARS = (
    Bar(_EVAL_LARGE, "median", at_most=0.3, unit="s"),
    Bar(_FIRST_LARGE, at_most=2),
    Bar(_FILTER_LARGE, at_most=2),
    Bar(_FIRST_LARGE, "median", at_most=0.2, unit="s"),
    Bar(_FILTER_LARGE, "median", at_most=0.2, unit="s"),
    Bar(_DEEP_LARGE, "median", at_most=0.2, unit="s"),
)


def _record(n: int) -> dict:
    status = ("completed", "completed", "completed", "failed", "error")[n % 5]
    started = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(1_700_000_000 + n * 7))
    task = f"@bench/tasks/task-{n % TASKS}"
    return {
        "_id": f"{task}-{n:08d}", "instance_id": f"{task}-{n:08d}", "task_id": task,
        "task_version": 1, "status": status,
        "outcome": {"completed": "passed", "failed": "scored below 1"}.get(status, "error"),
        "started_at_utc": started + "Z", "finished_at_utc": started + "Z",
        "duration_seconds": 1.5 + n % 7, "scores": {"answer": 1.0 if n % 5 < 3 else 0.0},
        "completed_steps": ["deploy", "model", "agent", "ask", "answer"], "failures": [],
        "context": {
            "agents": {"agent": {"agent": "model-agent", "model": "scripted:echo_script"}},
            "outputs": {"ask": {"response": "The echo tool returned: agents smoke " + "x" * 600,
                                "usage": {"input_tokens": 120, "output_tokens": 40}}},
            "metadata": {"seed": n},
        },
    }


def _seed(path: Path, count: int) -> None:
    from agent_env.stores.sqlite import SqliteDocumentStore

    documents = SqliteDocumentStore(path, synchronous="OFF")  # seeding is not what is measured
    for n in range(count):
        documents.insert("task_instances", _record(n))
    documents.close()


def _seed_group(path: Path, runs: int, group_id: str) -> None:
    """A finished eval run group of ``runs`` runs, its counters kept as an eval run keeps
    them."""
    from agent_env.evals.groups import Group, GroupStore, Slot
    from agent_env.evals.stats import RunSummary
    from agent_env.stores.sqlite import SqliteDocumentStore

    documents = SqliteDocumentStore(path, synchronous="OFF")
    slots = tuple(Slot(i, f"@bench/eval/task-{i // SAMPLES:05d}", 1, i % SAMPLES)
                  for i in range(runs))
    group = Group(group_id, "eval", "@bench/eval", 1, SAMPLES, slots)
    store = GroupStore(documents)
    store.create(group)
    for slot in slots:
        passed = (slot.index * 7) % 10 < 6
        outcome = "passed" if passed else "failed"
        store.claim(group, slot)
        store.finish(group, slot, f"{slot.task_id}-{slot.index}", outcome, [], RunSummary(
            slot.task_id, 1, outcome, "model-agent", f"model-{slot.index % 3}",
            1.0 if passed else 0.0, 1.0 + slot.index % 50, 1000 + slot.index % 900,
            0.001 * (1 + slot.index % 20)))
    documents.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _page_series(path: Path, count: int, repeat: int) -> dict[str, list[float]]:
    from aiohttp import ClientSession, web

    from agent_env.stores.sqlite import SqliteDocumentStore
    from agentenv_explorer.app import Explorer, create_app

    documents = SqliteDocumentStore(path)
    explorer = Explorer(documents=documents, versioned=None, objects=None, token="bench")
    app = create_app(explorer)
    deep = count // 5
    queries = {"first": "limit=50", "filtered": "limit=50&status=failed",
               "deep": f"limit=50&offset={deep}"}
    samples: dict[str, list[float]] = {name: [] for name in queries}

    async def main() -> None:
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        port = _free_port()
        await web.TCPSite(runner, "127.0.0.1", port).start()
        base = f"http://127.0.0.1:{port}/api/v1/task-instances?"
        headers = {"Authorization": "Bearer bench"}
        try:
            async with ClientSession(headers=headers) as http:
                for name, query in queries.items():
                    async with http.get(base + query) as resp:  # warm: caches, indexes
                        assert resp.status == 200, await resp.text()
                    for _ in range(repeat):
                        started = time.perf_counter()
                        async with http.get(base + query) as resp:
                            body = await resp.json()
                        samples[name].append(time.perf_counter() - started)
                        assert len(body["items"]) == 50, body
        finally:
            await runner.cleanup()

    asyncio.run(main())
    documents.close()
    return samples


def _up_series(agent_env: list[str], workdir: Path, repeat: int) -> list[float]:
    samples = []
    for attempt in range(repeat):
        env = {**os.environ, "AGENT_ENV_STATE_DIR": str(workdir / f"up-state-{attempt}")}
        env.pop("AGENT_ENV_CONFIG", None)
        started = time.perf_counter()
        proc = subprocess.Popen([*agent_env, "up", "--port", "0"], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=env)
        try:
            line = proc.stdout.readline() if proc.stdout else ""
            url = line.split("Explorer: ", 1)[1].strip()
            base, token = url.split("/?token=")
            request = urllib.request.Request(f"{base}/api/v1/health",
                                             headers={"Authorization": f"Bearer {token}"})
            with urllib.request.urlopen(request, timeout=10) as resp:
                assert resp.status == 200
            samples.append(time.perf_counter() - started)
        finally:
            proc.terminate()
            proc.wait(timeout=10)
    return samples


CHROMIUM = os.environ.get("AGENTENV_CHROMIUM", "/usr/bin/chromium")


def _browser_series(agent_env: list[str], state: Path, repeat: int,
                    groups: dict[str, str] | None = None) -> list[Series]:
    """First contentful paint and runs-table time of the page, over ``state``'s store; and
    for each of ``groups`` (series name -> group id), the time until its eval page's pass@k
    plot and matrix show."""
    import shutil

    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return []
    if not shutil.which(CHROMIUM):
        return []
    env = {**os.environ, "AGENT_ENV_STATE_DIR": str(state)}
    env.pop("AGENT_ENV_CONFIG", None)
    proc = subprocess.Popen([*agent_env, "up", "--port", "0"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    paint, table = [], []
    evals: dict[str, list[float]] = {}
    try:
        url = (proc.stdout.readline() if proc.stdout else "").split("Explorer: ", 1)[1].strip()
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
            try:
                for _ in range(repeat + 1):  # the first load warms the server's caches
                    page = browser.new_page()
                    started = time.perf_counter()
                    page.goto(url)
                    page.wait_for_selector("#runs tbody tr")
                    shown = time.perf_counter() - started
                    fcp = page.evaluate("performance.getEntriesByName("
                                        "'first-contentful-paint')[0].startTime") / 1000
                    page.close()
                    paint.append(fcp)
                    table.append(shown)
                for name, group_id in (groups or {}).items():
                    evals[name] = []
                    for _ in range(repeat + 1):
                        page = browser.new_page()
                        page.goto(url)  # the page loaded, as a reader has it open
                        page.wait_for_selector("#runs tbody tr")
                        started = time.perf_counter()  # then to the eval page, as a link goes
                        page.evaluate(f"location.hash = '#/group/{group_id}'")
                        page.wait_for_selector("#plot-passk circle.point")
                        page.wait_for_selector("#matrix tbody tr")
                        evals[name].append(time.perf_counter() - started)
                        page.close()
            finally:
                browser.close()
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    return [Series("explorer page first contentful paint", paint[1:]),
            Series("explorer page to runs table shown", table[1:]),
            *(Series(name, times[1:], baseline=_EVAL_SMALL if name != _EVAL_SMALL else None)
              for name, times in evals.items())]


def run(*, quick: bool, workdir: Path, agent_env: list[str], smoke: bool = False) -> list[Series]:
    repeat = 3 if smoke else 15 if quick else 30
    large = 5_000 if smoke else LARGE
    large_state = workdir / "explorer-large"
    large_state.mkdir(exist_ok=True)
    small_path, large_path = workdir / "explorer-small.sqlite", large_state / "documents.sqlite3"
    started = time.perf_counter()
    _seed(small_path, SMALL)
    _seed(large_path, large)
    _seed_group(large_path, SMALL, "evalrun-benchsmall")
    _seed_group(large_path, large, "evalrun-benchlarge")
    seeding = time.perf_counter() - started
    small = _page_series(small_path, SMALL, repeat)
    big = _page_series(large_path, large, repeat)
    note = f"seeded in {seeding:.1f}s"
    first, filtered, deep = _FIRST_LARGE, _FILTER_LARGE, _DEEP_LARGE
    evals = _EVAL_LARGE
    if smoke:  # fewer runs: named by their number, so no bar is judged on them
        first, filtered, deep, evals = (name.replace(f"{LARGE:,}", f"{large:,}")
                                        for name in (first, filtered, deep, evals))
    browser = _browser_series(agent_env, large_state, 2 if smoke else 5,
                              {_EVAL_SMALL: "evalrun-benchsmall", evals: "evalrun-benchlarge"})
    if not browser:
        note += "; page paint not measured: no playwright or no Chromium here"
    return [*browser,
        Series(_FIRST_SMALL, small["first"]),
        Series(first, big["first"], baseline=_FIRST_SMALL, note=note),
        Series(_FILTER_SMALL, small["filtered"]),
        Series(filtered, big["filtered"], baseline=_FILTER_SMALL),
        Series(_DEEP_SMALL, small["deep"]),
        Series(deep, big["deep"], baseline=_DEEP_SMALL),
        Series("agent-env up to first answer",
               _up_series(agent_env, workdir, 2 if smoke else 5)),
    ]
