"""Run events from a running task to the explorers up on this machine (``agent-env up``).

Why this way: a run and the explorer are separate processes, often started in separate
terminals, and the store holds a run's record only at its start and end. So each ``agent-env
up`` leaves a note in ``<state root>/explorer/live-<pid>.json`` (its URL and token, readable
by this user only) while it serves, and this plugin's ``agent_env_run_event`` hook posts every
run event to the explorers those notes name. A run never waits for it: events go through a
queue to one daemon thread, a post gives up after a second, and an explorer that is gone is
skipped (its note removed once its process is). At exit the queue gets two seconds to drain,
so ``run_finished`` arrives.
"""

from __future__ import annotations

import atexit
import json
import os
import queue
import threading
import time
from pathlib import Path
from typing import Any

FOLDER = "explorer"
NOTE_GLOB = "live-*.json"
#: how long a listing of the notes is reused (a run emits a few events per step)
LISTING_TTL = 1.0
POST_TIMEOUT = 1.0
DRAIN_AT_EXIT = 2.0

_lock = threading.Lock()
_queue: queue.Queue[tuple[list[tuple[str, str]], bytes]] = queue.Queue()
_thread: threading.Thread | None = None
_listing: tuple[float, list[tuple[str, str]]] = (0.0, [])


def notes_folder() -> Path:
    from agent_env.api import get_config

    return Path(get_config().state_root) / FOLDER


def write_note(url: str, token: str) -> Path:
    """Say an explorer serves at ``url`` (``up`` calls it; remove the file when it stops)."""
    folder = notes_folder()
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = folder / f"live-{os.getpid()}.json"
    partial = path.with_suffix(".tmp")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        json.dump({"url": url, "token": token, "pid": os.getpid()}, handle)
    os.replace(partial, path)
    return path


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def explorers() -> list[tuple[str, str]]:
    """(url, token) of every explorer serving now (the notes of live processes)."""
    global _listing
    now = time.monotonic()
    if now - _listing[0] < LISTING_TTL:
        return _listing[1]
    found = []
    try:
        notes = sorted(notes_folder().glob(NOTE_GLOB))
    except OSError:
        notes = []
    for note in notes:
        try:
            data = json.loads(note.read_text())
            url, token, pid = str(data["url"]), str(data["token"]), int(data["pid"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if not _alive(pid):
            note.unlink(missing_ok=True)  # an explorer that died without cleaning up
            continue
        found.append((url, token))
    _listing = (now, found)
    return found


def publish(event: Any) -> None:
    """Queue ``event`` (a ``RunEvent``) for every explorer up; returns at once."""
    global _thread
    targets = explorers()
    if not targets:
        return
    import attrs

    payload = json.dumps(attrs.asdict(event), default=str).encode()
    _queue.put((targets, payload))
    with _lock:
        if _thread is None or not _thread.is_alive():
            _thread = threading.Thread(target=_deliver, name="agentenv-explorer-events",
                                       daemon=True)
            _thread.start()
            atexit.register(_drain)


def _deliver() -> None:
    import urllib.error
    import urllib.request

    while True:
        targets, payload = _queue.get()
        try:
            for url, token in targets:
                request = urllib.request.Request(
                    f"{url}/api/v1/events", data=payload, method="POST",
                    headers={"Content-Type": "application/json",
                             "Authorization": f"Bearer {token}"})
                try:
                    with urllib.request.urlopen(request, timeout=POST_TIMEOUT):
                        pass
                except (OSError, urllib.error.URLError):
                    pass  # that explorer stopped or is busy: its page still polls
        finally:
            _queue.task_done()


def _drain() -> None:
    deadline = time.monotonic() + DRAIN_AT_EXIT
    while _queue.unfinished_tasks and time.monotonic() < deadline:
        time.sleep(0.02)
