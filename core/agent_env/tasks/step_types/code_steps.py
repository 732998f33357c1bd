"""``run_code``: run a Python artifact's ``run(input)`` and keep its JSON result.

``input`` is ``{"args": ..., "results": {earlier result ids: results}}``. The script runs in the
sandbox named by ``sandbox_name`` (with its ``python3``), else in a subprocess of this machine's
Python in a scratch folder. The result goes to ``metadata.script_results[result_id]``.
"""

from __future__ import annotations

import json
import posixpath
from typing import TYPE_CHECKING, Any

import attrs

from agent_env.tasks.steps import PreflightView, Step, StepError, exec_for_step

if TYPE_CHECKING:
    from agent_env.tasks.artifacts import ArtifactContent
    from agent_env.tasks.context import TaskContext

RESULT_MARKER = "--agent-env-result--"
DEFAULT_TIMEOUT = 300

# Runs in the target: loads the entry file, calls the entry point, prints the marked result.
RUNNER = f"""
import asyncio, importlib.util, inspect, json, sys
entry, name = sys.argv[1], sys.argv[2]
spec = importlib.util.spec_from_file_location("agent_env_script", entry)
module = importlib.util.module_from_spec(spec)
sys.path.insert(0, __import__("os").path.dirname(entry))
spec.loader.exec_module(module)
result = getattr(module, name)(json.load(sys.stdin))
if inspect.isawaitable(result):
    result = asyncio.run(result) if inspect.iscoroutine(result) else result
sys.stdout.write("\\n{RESULT_MARKER}\\n" + json.dumps(result))
"""


@attrs.define(kw_only=True)
class RunCode(Step):
    type = "run_code"
    example = {
        'id': 'prepare',
        'type': 'run_code',
        'script_artifact_id': 'prepare',
        'args': {'rows': 10},
        'sandbox_name': 'box',
    }
    entity_fields = {"script_artifact_id": "artifacts"}
    version_fields = {"script_artifact_version": "script_artifact_id"}

    script_artifact_id: str
    script_artifact_version: int | None = None
    entrypoint: str = "run"
    script_file: str | None = None
    args: dict[str, Any] = attrs.field(factory=dict)
    result_id: str | None = None
    timeout_seconds: float | None = None
    sandbox_name: str | None = None
    env_id: str | None = None
    agent_name: str | None = None

    def check(self, view: PreflightView) -> list[str]:
        problems = super().check(view)
        if self.env_id or self.agent_name:
            problems.append("running code on an env or agent is not supported yet; "
                            "give sandbox_name or nothing")
        return problems

    def _entry(self, artifact: ArtifactContent) -> str:
        names = [f.path for f in artifact.files if f.path.endswith(".py")]
        if self.script_file:
            if self.script_file not in names:
                raise StepError(f"artifact {artifact.id} has no '{self.script_file}'")
            return self.script_file
        if len(names) == 1:
            return names[0]
        if "run.py" in names:
            return "run.py"
        raise StepError(f"artifact {artifact.id} has {len(names)} .py files; name one with "
                        "script_file")

    async def run(self, ctx: TaskContext) -> None:
        artifact = await ctx.artifact(self.script_artifact_id,
                                      self.pinned("script_artifact_id"))
        entry = self._entry(artifact)
        results = ctx.metadata.setdefault("script_results", {})
        payload = json.dumps({"args": self.args, "results": results}).encode()
        timeout = float(self.timeout_seconds or DEFAULT_TIMEOUT)
        if self.sandbox_name:
            output = await self._in_sandbox(ctx, artifact, entry, payload, timeout)
        else:
            output = await self._on_host(artifact, entry, payload, timeout)
        _, marker, text = output.rpartition(f"\n{RESULT_MARKER}\n")
        if not marker:
            raise StepError(f"{entry} printed no result")
        results[self.result_id or self.id] = _parse_result(entry, self.entrypoint, text)
        ctx.outputs[self.id] = results[self.result_id or self.id]

    async def _on_host(
        self, artifact: ArtifactContent, entry: str, payload: bytes, timeout: float
    ) -> str:
        import asyncio
        import sys
        import tempfile
        from pathlib import Path

        with tempfile.TemporaryDirectory(prefix="agent-env-run-code-") as scratch:
            for item in artifact.files:
                if item.path.endswith(".py") and ".." not in item.path.split("/"):
                    target = Path(scratch, *item.path.split("/"))
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_bytes(item.data)
            process = await asyncio.create_subprocess_exec(
                sys.executable, "-c", RUNNER, str(Path(scratch, entry)), self.entrypoint,
                cwd=scratch, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
            try:
                out, err = await asyncio.wait_for(process.communicate(payload), timeout)
            except (TimeoutError, asyncio.CancelledError):
                process.kill()
                await process.wait()
                raise
        if process.returncode != 0:
            raise StepError(f"{entry} failed: {_last_line(err.decode(errors='replace'))}")
        return out.decode(errors="replace")

    async def _in_sandbox(
        self, ctx: TaskContext, artifact: ArtifactContent, entry: str, payload: bytes,
        timeout: float,
    ) -> str:
        import shlex

        sandbox = ctx.sandbox(self.sandbox_name or "")
        folder = f"/app/.run_code/{self.id}"
        for item in artifact.files:
            if item.path.endswith(".py"):
                await sandbox.put_file(posixpath.join(folder, item.path), item.data)
        await sandbox.put_file(f"{folder}/.runner.py", RUNNER.encode())
        await sandbox.put_file(f"{folder}/.input.json", payload)
        command = (f"python3 {folder}/.runner.py {shlex.quote(posixpath.join(folder, entry))} "
                   f"{shlex.quote(self.entrypoint)} < {folder}/.input.json")
        result = await exec_for_step(sandbox, command, cwd=folder, timeout=timeout)
        if not result.ok:
            raise StepError(f"{entry} failed: {_last_line(result.stderr)}")
        return result.stdout


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else "no error output"


def _parse_result(entry: str, entrypoint: str, text: str) -> Any:
    """The script's result; NaN and infinity (Python's json writes them) are refused here, as
    no store could keep them."""

    def refuse(constant: str) -> Any:
        raise StepError(f"{entry}: {entrypoint}() returned {constant}, which JSON has no form "
                        "for; return a finite number, a string or null")

    try:
        return json.loads(text, parse_constant=refuse)
    except ValueError as exc:
        raise StepError(f"{entry}: {entrypoint}() returned no JSON result: {exc}") from None
