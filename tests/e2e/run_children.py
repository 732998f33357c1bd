"""``agent-env run`` as a child process, and what it owns on Docker: for tests that kill,
interrupt or signal runs (mcp_env's crash tests, the agents' signal tests) and then check that
teardown or ``agent-env gc`` left nothing. Runs are found by the ``agentenv.owner`` label naming
the run's pid, so other work on the same daemon is never touched."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

AGENT_ENV = Path(sys.executable).with_name("agent-env")


class Run:
    """``agent-env run`` as a child process, with its own state folder and go/waiting files."""

    def __init__(self, workdir: Path, bundle: str, name: str, *args: str) -> None:
        self.state = workdir / f"state-{name}"
        self.waiting = workdir / f"{name}.waiting"
        self.go = workdir / f"{name}.go"
        env = {**os.environ, "AGENT_ENV_STATE_DIR": str(self.state),
               "AGENTENV_TEST_WAITING": str(self.waiting), "AGENTENV_TEST_GO": str(self.go)}
        env.pop("AGENT_ENV_CONFIG", None)
        self.process = subprocess.Popen(
            [str(AGENT_ENV), "run", bundle, *args], env=env, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True)
        self.pid = self.process.pid

    def wait_until_waiting(self, timeout: float = 180) -> None:
        deadline = time.monotonic() + timeout
        while not self.waiting.exists():
            if self.process.poll() is not None:
                out, err = self.process.communicate()
                raise AssertionError(f"the run ended early ({self.process.returncode}):\n"
                                     f"{out}\n{err}")
            assert time.monotonic() < deadline, "the run never reached its verify step"
            time.sleep(0.05)

    def wait_for_line(self, pattern: str, timeout: float = 180) -> list[str]:
        """Read stdout until a line matches (the CLI flushes every line)."""
        assert self.process.stdout is not None
        seen = []
        deadline = time.monotonic() + timeout
        for line in self.process.stdout:
            seen.append(line)
            if re.search(pattern, line):
                return seen
            assert time.monotonic() < deadline, "".join(seen)
        raise AssertionError(f"no line matched {pattern!r}:\n{''.join(seen)}")

    def finish(self, timeout: float = 120) -> tuple[int, str, str]:
        out, err = self.process.communicate(timeout=timeout)
        return self.process.returncode, out, err


def owned_by(client: Any, pid: int) -> dict[str, list[dict[str, Any]]]:
    """Containers and networks whose ``agentenv.owner`` label names process ``pid`` (one list
    call each: no per-item inspect that races with a concurrent removal)."""
    label = {"label": "agentenv.owner"}

    def mine(labels: dict[str, str] | None) -> bool:
        return f" pid={pid} " in f" {(labels or {}).get('agentenv.owner', '')} "

    return {"containers": [c for c in client.api.containers(all=True, filters=label)
                           if mine(c.get("Labels"))],
            "networks": [n for n in client.api.networks(filters=label)
                         if mine(n.get("Labels"))]}


def names(found: dict[str, list[dict[str, Any]]]) -> list[str]:
    return sorted([c["Names"][0].lstrip("/") for c in found["containers"]]
                  + [n["Name"] for n in found["networks"]])


def gc(*args: str, state: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "AGENT_ENV_STATE_DIR": str(state)}
    env.pop("AGENT_ENV_CONFIG", None)
    return subprocess.run([str(AGENT_ENV), "gc", *args], capture_output=True, text=True,
                          env=env, timeout=120, check=False, stdin=subprocess.DEVNULL)


def network_gateway(network: Any) -> str:
    """The host's address on a Docker network: its IPAM ``Gateway``, or, where the daemon does
    not record one (the default bridge on some daemons), the subnet's first address, which is
    the one Docker gives the bridge."""
    import ipaddress

    config = network.attrs["IPAM"]["Config"][0]
    if config.get("Gateway"):
        return str(config["Gateway"])
    return str(next(ipaddress.ip_network(config["Subnet"]).hosts()))
