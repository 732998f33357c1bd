"""Score a Harbor task the way Harbor does (written by ``agent-env bundle import harbor``).

``env_outcome_verifier`` calls ``verify(mcp_url)`` once the agent is done. The task's ``tests/``
folder sits next to this file (the agent never saw it): it is sent to the env's data plane,
where the task's container runs ``tests/test.sh`` (see ``agentenv_harbor_shell.py`` in the env),
and the rewards it wrote become the score rows: ``reward.txt`` one row, ``reward.json`` one
row per named reward. A row passes at 1.0.

A task whose verifier runs in a container of its own (``[verifier] environment_mode =
"separate"``, or a ``[verifier.environment]`` table) is scored there instead: the task's
``artifacts`` (and ``/logs/artifacts``) are collected from the agent's container and written
at the same paths in the verifier's, deployed after the agent from ``tests/Dockerfile`` (its
env is named in ``harbor-verifier.json``), whose image holds ``/tests`` itself.
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
import tomllib
from pathlib import Path
from typing import Any

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


def _separate() -> dict[str, Any] | None:
    """``{"env": the verifier's env, "artifacts": [paths]}`` for a separate verifier, else
    None (written by the import: ``harbor-verifier.json``)."""
    path = HERE / "harbor-verifier.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def _data_part(answer: dict[str, Any], key: str) -> Any:
    return next((p["data"][key] for p in answer.get("parts", [])
                 if isinstance(p.get("data"), dict) and key in p["data"]), None)


def _tests() -> dict[str, dict[str, object]]:
    root = HERE / "tests"
    return {path.relative_to(root).as_posix(): {
        "data": base64.b64encode(path.read_bytes()).decode("ascii"),
        "mode": path.stat().st_mode & 0o777}
        for path in sorted(root.rglob("*")) if path.is_file()}


def _base(mcp_url: str) -> str:
    return mcp_url[: -len("/mcp")] if mcp_url.endswith("/mcp") else mcp_url


async def _collect(mcp_url: str, paths: list[str]) -> dict[str, Any]:
    """The artifacts from the agent's container, as the shell server read them."""
    async with DataPlaneClient(_base(mcp_url), timeout=30) as data:
        await data.call("data/add", {"parts": [{"kind": "data", "data": {
            "harbor_collect": paths}}]})
        collected = _data_part(await data.call("data/get", {}), "harbor_collected")
    if not isinstance(collected, dict) or "files" not in collected:
        raise RuntimeError(f"collecting the artifacts failed: "
                           f"{(collected or {}).get('error', 'no answer')}")
    return dict(collected["files"])


async def verify(mcp_url: str, run: Any = None) -> list[dict[str, object]]:
    timeout = _timeout()
    separate = _separate()
    if separate is None:
        payload: dict[str, Any] = {"harbor_tests": _tests(), "timeout_sec": timeout}
        target = mcp_url
    else:
        files = await _collect(mcp_url, list(separate.get("artifacts") or []))
        payload = {"harbor_files": files, "timeout_sec": timeout}
        target = run.env_url(separate["env"])
    async with DataPlaneClient(_base(target), timeout=30) as data:
        await data.call("data/add", {"parts": [{"kind": "data", "data": payload}]})
        deadline = time.monotonic() + timeout + 30
        while True:
            answer = await data.call("data/get", {})
            result = _data_part(answer, "harbor_result")
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
