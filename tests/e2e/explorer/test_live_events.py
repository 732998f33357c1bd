"""Live updates end to end: ``agent-env up`` serving, ``agent-env run hello`` in another process,
and the run's events (sent by the explorer plugin's ``agent_env_run_event`` hook) arrive on the
explorer's event stream while the run happens; the explorer's note is gone once it stops."""

from __future__ import annotations

import http.client
import json
import signal
import threading
import time
from urllib.parse import urlsplit


def listen(url: str, token: str, events: list[dict], ready: threading.Event) -> None:
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    conn.request("GET", "/api/v1/events/stream", headers={"Authorization": f"Bearer {token}"})
    response = conn.getresponse()
    assert response.status == 200
    while True:
        line = response.readline().decode()
        if not line:
            return
        if line.startswith("event: ready"):
            ready.set()
        if line.startswith("data: ") and ready.is_set() and line.strip() != "data: {}":
            events.append(json.loads(line[6:]))
            if events[-1]["kind"] == "run_finished":
                return


def test_a_runs_events_reach_a_running_explorer(agent_env) -> None:
    explorer = agent_env.start("up", "--port", "0")
    try:
        assert explorer.stdout is not None
        printed = explorer.stdout.readline()
        base, token = printed.split("Explorer: ", 1)[1].strip().split("/?token=")
        notes = list((agent_env.state / "explorer").glob("live-*.json"))
        assert len(notes) == 1 and json.loads(notes[0].read_text())["url"] == base
        assert notes[0].stat().st_mode & 0o777 == 0o600  # it holds the token

        events: list[dict] = []
        ready = threading.Event()
        reader = threading.Thread(target=listen, args=(base, token, events, ready), daemon=True)
        reader.start()
        assert ready.wait(10)
        done = agent_env("run", "hello")
        assert done.returncode == 0, done.stderr
        instance = done.stdout.split(", instance ")[1].split()[0]
        reader.join(10)
        kinds = [(e["kind"], e.get("step_id")) for e in events]
        assert kinds[0] == ("run_started", None) and kinds[-1] == ("run_finished", None)
        assert ("step_started", "hello") in kinds and ("step_finished", "hello") in kinds
        assert {e["instance_id"] for e in events} == {instance}
        finished = [e for e in events if e["kind"] == "step_finished"]
        assert all(e["outcome"] == "completed" and e["duration_seconds"] >= 0 for e in finished)
    finally:
        explorer.send_signal(signal.SIGINT)
        explorer.wait(10)
    deadline = time.monotonic() + 5
    while list((agent_env.state / "explorer").glob("live-*.json")) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert list((agent_env.state / "explorer").glob("live-*.json")) == []


def test_a_run_with_no_explorer_up_sends_nothing_and_is_not_slowed(agent_env) -> None:
    done = agent_env("run", "hello")
    assert done.returncode == 0
    assert not (agent_env.state / "explorer").exists()
