"""Score a Harbor task the way Harbor does (written by ``agent-env bundle import harbor``).

``env_outcome_verifier`` calls ``verify(mcp_url)`` once the agent is done. The task's ``tests/``
folder sits next to this file (the agent never saw it): it is sent to the env's data plane,
where the task's container runs ``tests/test.sh`` (see ``agentenv_harbor_shell.py`` in the env),
and the rewards it wrote become the score rows: ``reward.txt`` one row, ``reward.json`` one
row per named reward. A row passes at 1.0.
"""

from __future__ import annotations

import asyncio
import base64
import time
import tomllib
from pathlib import Path

from agentenv_protocol.client import DataPlaneClient

HERE = Path(__file__).parent
DEFAULT_TIMEOUT = 600.0
POLL = 0.5


def _timeout() -> float:
    try:
        settings = tomllib.loads((HERE / "task.toml").read_text(encoding="utf-8"))
        return float(settings.get("verifier", {}).get("timeout_sec") or DEFAULT_TIMEOUT)
    except (OSError, ValueError):
        return DEFAULT_TIMEOUT


def _tests() -> dict[str, dict[str, object]]:
    root = HERE / "tests"
    return {path.relative_to(root).as_posix(): {
        "data": base64.b64encode(path.read_bytes()).decode("ascii"),
        "mode": path.stat().st_mode & 0o777}
        for path in sorted(root.rglob("*")) if path.is_file()}


async def verify(mcp_url: str) -> list[dict[str, object]]:
    timeout = _timeout()
    base = mcp_url[: -len("/mcp")] if mcp_url.endswith("/mcp") else mcp_url
    async with DataPlaneClient(base, timeout=30) as data:
        await data.call("data/add", {"parts": [{"kind": "data", "data": {
            "harbor_tests": _tests(), "timeout_sec": timeout}}]})
        deadline = time.monotonic() + timeout + 30
        while True:
            answer = await data.call("data/get", {})
            result = next((p["data"]["harbor_result"] for p in answer.get("parts", [])
                           if isinstance(p.get("data"), dict)
                           and "harbor_result" in p["data"]), None)
            if result is None:
                raise RuntimeError("the env answered no harbor_result: is it an imported "
                                   "Harbor env?")
            if result.get("state") == "done" or time.monotonic() > deadline:
                break
            await asyncio.sleep(POLL)
    if result.get("state") != "done":
        return [{"id": "reward", "result": False, "score": 0.0,
                 "description": f"the tests did not finish within {timeout:g}s"}]
    tail = str(result.get("output_tail") or "").strip().splitlines()[-5:]
    where = f"tests/test.sh exited {result.get('exit_code')}" + (
        f"; its last lines: {' | '.join(tail)}" if tail else "")
    rewards = result.get("rewards")
    if not isinstance(rewards, dict):
        return [{"id": "reward", "result": False, "score": 0.0,
                 "description": f"{rewards} ({where})"}]
    return [{"id": name, "result": value >= 1.0, "score": max(0.0, min(1.0, value)),
             "description": f"{name} = {value:g} ({where})"}
            for name, value in sorted(rewards.items())]
