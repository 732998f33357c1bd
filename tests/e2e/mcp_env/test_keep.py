"""``agent-env run echo-mcp --keep``: the env stays up after the run, its gateway URL and token
are printed and work (and nothing works without the token), and Ctrl-C tears it down and exits
130 as any Ctrl-C does."""

from __future__ import annotations

import json
import re
import signal
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from run_children import Run, owned_by

pytestmark = pytest.mark.docker

ENDPOINT = re.compile(r"^  \[[^\]]+\] env \S+ gateway \(MCP at /mcp\): (http://\S+)  "
                      r"\(Authorization: Bearer (\S+)\)$")


def initialize(url: str, token: str | None) -> int:
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "keep-test", "version": "1"}}}
    request = urllib.request.Request(f"{url}/mcp", json.dumps(body).encode(), headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


def test_keep_prints_a_working_endpoint_and_ctrl_c_tears_it_down(
        tmp_path: Path, docker_client: Any) -> None:
    from agentenv_mcp_env.plugin import BUNDLES

    run = Run(tmp_path, str(BUNDLES / "echo-mcp"), "keep", "--keep")
    try:
        seen = run.wait_for_line(r"^Holding 1 sandbox up; Ctrl-C tears it down\.$")
        assert "tasks/smoke.json v1: passed (echoes: 1)" in "".join(seen)
        line = run.wait_for_line(r"gateway \(MCP at /mcp\)")[-1].rstrip("\n")
        found = ENDPOINT.match(line)
        assert found, line
        url, token = found.groups()
        assert initialize(url, token) == 200
        assert initialize(url, None) == 401
        assert initialize(url, token + "x") == 401
        # env, gateway and the sandbox's DNS answerer
        assert len(owned_by(docker_client, run.pid)["containers"]) == 3
        run.process.send_signal(signal.SIGINT)
        code, out, err = run.finish(timeout=60)
        assert code == 130, out + err
        assert "Tore down 1 sandbox." in out
        assert owned_by(docker_client, run.pid) == {"containers": [], "networks": []}
    finally:
        if run.process.poll() is None:
            run.process.kill()
            run.process.communicate()
