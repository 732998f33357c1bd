"""Token bypass, as it was found: ``agent-env run echo-mcp --keep``, then a host process POSTs to
the env container's own address. It must not reach the env server; the gateway URL the run
prints, with its token, must.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from run_children import owned_by

pytestmark = pytest.mark.docker

AGENT_ENV = Path(sys.executable).with_name("agent-env")
INITIALIZE = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "hostile", "version": "0"}}}).encode()


def initialize(url: str, token: str | None = None) -> str:
    """REACHED (an MCP server answered initialize), ANSWERED <status> or REFUSED <error>."""
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    try:
        with urllib.request.urlopen(urllib.request.Request(url, data=INITIALIZE,
                                                           headers=headers), timeout=4) as resp:
            return "REACHED" if b'"serverInfo"' in resp.read() else f"ANSWERED {resp.status}"
    except urllib.error.HTTPError as exc:
        return f"ANSWERED {exc.code}"
    except OSError as exc:
        return f"REFUSED {type(exc).__name__}"


def test_a_kept_runs_env_server_is_reachable_only_through_its_gateway(
    tmp_path: Path, docker_client: Any,
) -> None:
    env = {**os.environ, "AGENT_ENV_STATE_DIR": str(tmp_path / "state"), "NO_COLOR": "1"}
    env.pop("AGENT_ENV_CONFIG", None)
    run = subprocess.Popen([str(AGENT_ENV), "run", "echo-mcp", "--keep"], cwd=tmp_path, env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert run.stdout is not None
        seen: list[str] = []
        found = None
        deadline = time.monotonic() + 300
        for line in run.stdout:
            seen.append(line)
            found = re.search(r"(http://\S+)\s+\(Authorization: Bearer (\S+)\)", line)
            if found:
                break
            assert time.monotonic() < deadline, "".join(seen)
        assert found, "".join(seen)
        url, token = found.group(1), found.group(2)
        mcp = url if url.endswith("/mcp") else url.rstrip("/") + "/mcp"

        containers = owned_by(docker_client, run.pid)["containers"]
        (env_container,) = [c for c in containers
                            if (c.get("Labels") or {}).get("agentenv.container") == "env"]
        networks = env_container["NetworkSettings"]["Networks"]
        addresses = [n["IPAddress"] for n in networks.values() if n.get("IPAddress")]
        assert len(addresses) == 1, networks
        start = time.monotonic()
        direct = initialize(f"http://{addresses[0]}:18765/mcp")
        took = time.monotonic() - start
        assert not direct.startswith("REACHED"), direct
        print(f"host -> env {addresses[0]}: {direct} in {took:.2f}s")
        assert initialize(mcp) == "ANSWERED 401"
        assert initialize(mcp, token) == "REACHED"
    finally:
        run.send_signal(signal.SIGINT)
        out, err = run.communicate(timeout=120)
    assert owned_by(docker_client, run.pid) == {"containers": [], "networks": []}, (out, err)
