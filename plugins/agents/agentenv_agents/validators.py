"""Two agents that validate tasks rather than solve them: ``oracle`` and ``nop``.

Why: before an eval spends money on a model, its tasks must be solvable and their verifiers must
tell a solution from nothing. ``agent-env run BUNDLE --agent oracle`` runs each task's reference
solution in place of an agent, and ``--agent nop`` answers nothing at all; the task's own
verifiers then score as usual (the oracle should score 1, nop 0).

* ``nop`` deploys nothing and answers every prompt with an empty reply.
* ``oracle`` runs the solution the deploy step names with ``solution_artifact_id`` (a
  ``bundle import harbor`` writes it: the task's ``solution/``): its files are sent to each env
  the agent was given, only at that moment, through the env's data plane, where the shell
  server of an imported Harbor env writes them to ``/solution`` and runs ``bash
  /solution/solve.sh`` as root in the task's working directory, with ``[solution] env`` from
  the task's ``task.toml``. The reply is how the script ended. A step that names no solution,
  or an env that cannot run one, is an ``agent_error`` reply saying so: that task scores 0 and
  the run's other tasks go on.
"""

from __future__ import annotations

import asyncio
import base64
import time
import tomllib
from typing import Any, ClassVar

import attrs

from agent_env.api import AGENT_ERROR, AgentReply, StepError

#: How often the oracle asks an env whether its solution has finished.
POLL = 0.25


@attrs.define
class NopAgent:
    """Answers every prompt with nothing."""

    name: str

    async def prompt(self, step: Any, timeout: float) -> AgentReply:
        return AgentReply(response="")

    def describe(self) -> dict[str, Any]:
        return {"agent_name": self.name, "type": "nop"}


class NopAgentType:
    name: ClassVar[str] = "nop"

    @classmethod
    async def deploy(cls, ctx: Any, step: Any, setup: Any, source: Any) -> NopAgent:
        return NopAgent(setup.name)


@attrs.define
class OracleAgent:
    """Runs a task's reference solution in the envs it was given (see the module)."""

    name: str
    envs: dict[str, Any]
    #: ``{relative path: {"data": base64, "mode": int}}``; None: the task names no solution
    files: dict[str, Any] | None
    env_vars: dict[str, str]

    async def prompt(self, step: Any, timeout: float) -> AgentReply:
        if self.files is None:
            return AgentReply(response="", error_type=AGENT_ERROR,
                              error_message="this task names no solution for the oracle "
                                            "(deploy_agent's solution_artifact_id)")
        if not self.envs:
            return AgentReply(response="", error_type=AGENT_ERROR,
                              error_message="the oracle was given no env to run the "
                                            "solution in (deploy_agent's env_ids)")
        lines = []
        for env_id, env in self.envs.items():
            result = await _solve(env, self.files, self.env_vars, timeout)
            if "error" in result:
                return AgentReply(response="\n".join(lines), error_type=AGENT_ERROR,
                                  error_message=f"env {env_id}: {result['error']}")
            tail = str(result.get("output_tail") or "").strip().splitlines()[-5:]
            lines.append(f"solve.sh exited {result.get('exit_code')} in env {env_id}"
                         + (f"; its last lines: {' | '.join(tail)}" if tail else ""))
        return AgentReply(response="\n".join(lines))

    def describe(self) -> dict[str, Any]:
        return {"agent_name": self.name, "type": "oracle", "envs": list(self.envs),
                "solution_files": sorted(self.files or {})}


async def _solve(env: Any, files: dict[str, Any], env_vars: dict[str, str],
                 timeout: float) -> dict[str, Any]:
    """Send the solution to ``env`` and wait for it to finish; its result, or ``{"error"}``."""
    from agentenv_protocol.client import DataPlaneClient

    base = env.mcp_url.removesuffix("/mcp")
    async with DataPlaneClient(base, timeout=30) as data:
        await data.call("data/add", {"parts": [{"kind": "data", "data": {
            "harbor_solution": files, "env": env_vars, "timeout_sec": timeout}}]})
        deadline = time.monotonic() + timeout + 30
        while True:
            answer = await data.call("data/get", {})
            result = next((p["data"]["harbor_solution_result"] for p in answer.get("parts", [])
                           if isinstance(p.get("data"), dict)
                           and "harbor_solution_result" in p["data"]), None)
            if result is None:
                return {"error": "it runs no solutions (only an env imported with bundle "
                                 "import harbor does)"}
            if result.get("state") == "done":
                return dict(result)
            if time.monotonic() > deadline:
                return {"error": f"solve.sh did not finish within {timeout:g}s"}
            await asyncio.sleep(POLL)


class OracleAgentType:
    name: ClassVar[str] = "oracle"

    @classmethod
    async def deploy(cls, ctx: Any, step: Any, setup: Any, source: Any) -> OracleAgent:
        artifact_id = getattr(step, "solution_artifact_id", None)
        if not artifact_id:
            return OracleAgent(setup.name, dict(setup.envs), None, {})
        artifact = await ctx.artifact(artifact_id, step.pinned("solution_artifact_id"))
        files, env_vars = solution_files(artifact)
        if not files:
            raise StepError(f"solution artifact {artifact_id} has no solve.sh (in solution/ "
                            "or at its top)")
        return OracleAgent(setup.name, dict(setup.envs), files, env_vars)


def solution_files(artifact: Any) -> tuple[dict[str, Any], dict[str, str]]:
    """The artifact's ``solution/`` folder (or its top, when it has ``solve.sh`` there) as
    ``{relative path: {"data", "mode"}}``, and ``[solution] env`` of its ``task.toml``."""
    by_path = {f.path: f for f in artifact.files}
    prefix = "solution/" if "solution/solve.sh" in by_path else ""
    if prefix + "solve.sh" not in by_path:
        return {}, {}
    files = {path[len(prefix):]: {"data": base64.b64encode(f.data).decode("ascii"),
                                  "mode": int(getattr(f, "mode", 0o644) or 0o644)}
             for path, f in by_path.items() if path.startswith(prefix)}
    env_vars: dict[str, str] = {}
    if "task.toml" in by_path:
        try:
            settings = tomllib.loads(by_path["task.toml"].data.decode("utf-8"))
            env_vars = {str(k): str(v) for k, v in
                        ((settings.get("solution") or {}).get("env") or {}).items()}
        except (ValueError, AttributeError):
            env_vars = {}
    return files, env_vars
