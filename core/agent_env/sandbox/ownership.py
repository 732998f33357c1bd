"""Who made a sandbox and until when it may live: the labels every provider writes.

Why a shared module: ``agent-env gc`` judges leftovers of every provider from these labels
alone, so they must read the same whoever wrote them. A provider that can label what it creates
puts :func:`ownership_labels` on it:

* ``agentenv.owner``: ``host=<hostname> boot=<boot id> pid=<pid> start=<start ticks>``, the
  process that created the sandbox (:func:`owner_label`). The start time tells a reused pid from
  the original process; the boot id tells a process of an earlier boot;
* ``agentenv.expires``: Unix seconds after which the sandbox is garbage whoever owns it;
* ``agentenv.state``: the state root whose records (deployments, runs) account for the
  sandbox (:func:`state_label`). ``gc`` under another state root cannot see those records, so
  it leaves such a sandbox alone until it expires.

:func:`owner_state` is the verdict on an owner label, from this host.
"""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path
from typing import Any

import attrs

OWNER_LABEL = "agentenv.owner"
EXPIRES_LABEL = "agentenv.expires"
STATE_LABEL = "agentenv.state"
_BOOT_ID = Path("/proc/sys/kernel/random/boot_id")


def boot_id() -> str:
    """This boot of this machine ("" where the OS does not say)."""
    try:
        return _BOOT_ID.read_text(encoding="ascii").strip()
    except OSError:
        return ""


def process_start(pid: int) -> int | None:
    """The start time of ``pid`` in clock ticks since boot; None if it is gone or a zombie.

    -1 when the process exists but the OS has no ``/proc`` to say when it started.
    """
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except FileNotFoundError:
        return None
    except OSError:
        return _exists(pid)
    fields = stat.rsplit(")", 1)[-1].split()
    if not fields or fields[0] in ("Z", "X"):  # a zombie has exited; only its entry is left
        return None
    return int(fields[19])  # field 22 of proc(5); fields[0] is field 3


def _exists(pid: int) -> int | None:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        return -1
    return -1


def owner_label(pid: int | None = None) -> str:
    """The ``agentenv.owner`` value naming this process (or ``pid``) on this boot of this host."""
    pid = os.getpid() if pid is None else pid
    start = process_start(pid)
    return (f"host={socket.gethostname()} boot={boot_id() or '-'} pid={pid} "
            f"start={start if start is not None else -1}")


def parse_owner(value: str) -> dict[str, str]:
    return dict(part.split("=", 1) for part in value.split() if "=" in part)


@attrs.frozen
class OwnerState:
    """``alive`` True/False, or None when it cannot be judged from here; ``why`` says how."""

    alive: bool | None
    why: str


def owner_state(value: str | None) -> OwnerState:
    """Judge an ``agentenv.owner`` label from this host."""
    if not value:
        return OwnerState(None, "no owner recorded")
    owner = parse_owner(value)
    try:
        pid, start = int(owner["pid"]), int(owner.get("start", "-1"))
    except (KeyError, ValueError):
        return OwnerState(None, f"unreadable owner '{value}'")
    host = owner.get("host", "")
    if host and host != socket.gethostname():
        return OwnerState(None, f"owned by process {pid} on host {host}")
    boot = owner.get("boot", "-")
    if boot not in ("-", "") and boot_id() and boot != boot_id():
        return OwnerState(False, f"its process {pid} ran before this machine restarted")
    now = process_start(pid)
    if now is None:
        return OwnerState(False, f"its process {pid} is gone")
    if start >= 0 and now >= 0 and now != start:
        return OwnerState(False, f"its process {pid} is gone (the pid now names another one)")
    return OwnerState(True, f"process {pid} is running")


def _boot_time() -> float | None:
    try:
        for line in Path("/proc/stat").read_text(encoding="ascii").splitlines():
            if line.startswith("btime "):
                return float(line.split()[1])
    except OSError:
        pass
    return None


def local_owner_state(pid: Any, created: float) -> OwnerState:
    """The owner of a ``local`` work folder: its pid, and a process started after the folder was
    made cannot be the one that made it (the pid was reused)."""
    if not isinstance(pid, int):
        return OwnerState(None, "no owner recorded")
    start = process_start(pid)
    if start is None:
        return OwnerState(False, f"its process {pid} is gone")
    boot = _boot_time()
    if start >= 0 and boot is not None:
        started = boot + start / os.sysconf("SC_CLK_TCK")
        if started > created + 1:
            return OwnerState(False, f"its process {pid} is gone (the pid now names another one)")
    return OwnerState(True, f"process {pid} is running")


def state_label() -> str:
    """This process's state root, as the ``agentenv.state`` label names it (its real path)."""
    from agent_env.runtime import current

    return os.path.realpath(current().config.state_root)


def ownership_labels(ttl_seconds: float | None = None) -> dict[str, str]:
    """The owner and state-root labels for this process, and the expiry label when there is a
    TTL."""
    labels = {OWNER_LABEL: owner_label(), STATE_LABEL: state_label()}
    if ttl_seconds:
        labels[EXPIRES_LABEL] = str(int(time.time()) + int(ttl_seconds))
    return labels
