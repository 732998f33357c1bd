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
#: The run events a live page shows (a step's progress ``note`` lines stay in the terminal).
LIVE_KINDS = frozenset({"run_started", "run_finished", "step_started", "step_finished"})
#: how long a listing of the notes is reused (a run emits a few events per step)
LISTING_TTL = 1.0
POST_TIMEOUT = 1.0
DRAIN_AT_EXIT = 2.0

#: Where the runtime keeps its publisher (``current().state``): each runtime has its own state
#: root, so its own explorers, and ``reset()`` forgets it.
PUBLISHER_STATE = "agentenv_explorer.live"


def notes_folder() -> Path:
    from agent_env.api import current

    return Path(current().config.state_root) / FOLDER


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


class Publisher:
    """The events of one runtime on their way to its explorers: a queue, one daemon thread
    that posts them, and a short-lived listing of the explorers' notes."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.lock = threading.Lock()
        self.queue: queue.Queue[tuple[list[tuple[str, str]], bytes]] = queue.Queue()
        self.thread: threading.Thread | None = None
        self.listing: tuple[float, list[tuple[str, str]]] = (0.0, [])

    def explorers(self) -> list[tuple[str, str]]:
        """(url, token) of every explorer serving now (the notes of live processes)."""
        now = time.monotonic()
        if now - self.listing[0] < LISTING_TTL:
            return self.listing[1]
        found = []
        try:
            notes = sorted(self.folder.glob(NOTE_GLOB))
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
        self.listing = (now, found)
        return found

    def publish(self, event: Any) -> None:
        """Queue ``event`` (a ``RunEvent``) for every explorer up; returns at once."""
        if event.kind not in LIVE_KINDS:
            return
        targets = self.explorers()
        if not targets:
            return
        import attrs

        payload = json.dumps(attrs.asdict(event), default=str).encode()
        self.queue.put((targets, payload))
        with self.lock:
            if self.thread is None or not self.thread.is_alive():
                self.thread = threading.Thread(target=self._deliver,
                                               name="agentenv-explorer-events", daemon=True)
                self.thread.start()
                atexit.register(self.drain)

    def _deliver(self) -> None:
        import urllib.error
        import urllib.request

        while True:
            targets, payload = self.queue.get()
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
                self.queue.task_done()

    def drain(self) -> None:
        """Give queued events a moment to arrive (at exit, so ``run_finished`` does)."""
        deadline = time.monotonic() + DRAIN_AT_EXIT
        while self.queue.unfinished_tasks and time.monotonic() < deadline:
            time.sleep(0.02)


def publisher() -> Publisher:
    """The current runtime's publisher, made on first use."""
    from agent_env.api import current

    state = current().state
    found = state.get(PUBLISHER_STATE)
    if found is None:
        found = state[PUBLISHER_STATE] = Publisher(notes_folder())
    return found  # type: ignore[no-any-return]


def explorers() -> list[tuple[str, str]]:
    """(url, token) of every explorer serving now, as the current runtime sees them."""
    return publisher().explorers()


def publish(event: Any) -> None:
    """Queue ``event`` for every explorer of the current runtime; returns at once."""
    publisher().publish(event)
