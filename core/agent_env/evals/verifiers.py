"""Step types evals need: a unit-test verifier run in a sandbox, and collecting its files.

``run_container_unit_tests_verifier`` runs ``test_command`` (``bash -c``, in ``base_dir``) in a
deployed sandbox and scores it: from ``reward_file`` when one is given and the command wrote it
(a number, or JSON ``{"reward": x}``, clamped to [0, 1]), else 1 for exit code 0 and 0 for any
other. A reward file that cannot be read as a number is an error row (score 0), never a pass.

``collect_artifacts`` copies files (a folder: every file under it) out of a sandbox into the
object store, content-addressed as the ledger stores bundle files (``blobs/sha256/<hex>``), and
lists them in the run's record (``outputs[<step id>].files``: path, sha256, size, key).
"""

from __future__ import annotations

import json
import posixpath
from typing import TYPE_CHECKING, Any

import attrs

from agent_env.tasks.scores import ScoreRow
from agent_env.tasks.steps import PreflightView, Step, StepError

if TYPE_CHECKING:
    from agent_env.sandbox.base import Sandbox
    from agent_env.tasks.context import TaskContext


def _sandbox(ctx: TaskContext, name: str | None) -> Sandbox:
    if name:
        return ctx.sandbox(name)
    if len(ctx.sandboxes) == 1:
        return next(iter(ctx.sandboxes.values()))
    raise StepError("give sandbox_name: " + (
        "more than one sandbox is up" if ctx.sandboxes else "no sandbox is up"))


def _in(base_dir: str, path: str) -> str:
    return path if posixpath.isabs(path) else posixpath.join(base_dir, path)


def parse_reward(text: str) -> float:
    """``0.75`` or ``{"reward": 0.75}`` -> 0.75 (clamped to [0, 1]); ValueError otherwise."""
    value: Any = json.loads(text) if text.strip().startswith("{") else text.strip()
    if isinstance(value, dict):
        value = value.get("reward")
    if isinstance(value, bool) or value is None:
        raise ValueError(f"no number in {text.strip()[:80]!r}")
    number = float(value)
    if number != number:  # NaN
        raise ValueError("the reward is NaN")
    return min(1.0, max(0.0, number))


@attrs.define(kw_only=True)
class RunContainerUnitTestsVerifier(Step):
    type = "run_container_unit_tests_verifier"

    #: the test command, run with ``bash -c`` in ``base_dir``
    test_command: str = ""
    sandbox_name: str | None = None
    base_dir: str = "/app"
    #: a file the tests write their reward to (a number or ``{"reward": x}``); optional
    reward_file: str | None = None
    timeout_seconds: float = 600
    verifier_id: str | None = None

    def check(self, view: PreflightView) -> list[str]:
        problems = super().check(view)
        if not self.test_command.strip():
            problems.append("needs 'test_command', the command that runs the tests")
        return problems

    async def run(self, ctx: TaskContext) -> None:
        sandbox = _sandbox(ctx, self.sandbox_name)
        criterion = {"type": "unit_tests", "test_command": self.test_command}
        try:
            result = await sandbox.exec(self.test_command, cwd=self.base_dir,
                                        timeout=float(self.timeout_seconds))
        except TimeoutError:
            row = ScoreRow(0, 0.0, False, f"timed out after {self.timeout_seconds:g}s",
                           criterion=criterion)
            ctx.record_verification(self, self.verifier_id, [row], "all_pass")
            return
        output = (result.stdout + result.stderr).strip()[-500:]
        ctx.outputs[self.id] = {"exit_code": result.exit_code, "output_tail": output}
        score, why = (1.0 if result.ok else 0.0), f"tests exited {result.exit_code}"
        if self.reward_file:
            path = _in(self.base_dir, self.reward_file)
            try:
                text = (await sandbox.get_file(path)).decode(errors="replace")
            except FileNotFoundError:
                why += f"; no reward file {path}, scored by the exit code"
            else:
                try:
                    score = parse_reward(text)
                    why += f"; reward {score:g} from {path}"
                except ValueError as exc:
                    score, why = 0.0, f"error: the reward file {path} is unreadable ({exc})"
        ctx.outputs[self.id]["score"] = score
        row = ScoreRow(0, score, score >= 1, why, criterion=criterion)
        ctx.record_verification(self, self.verifier_id, [row], "weighted_average")


@attrs.define(kw_only=True)
class CollectArtifacts(Step):
    type = "collect_artifacts"

    #: files or folders to copy out, relative to ``base_dir`` unless absolute
    paths: list[str] = attrs.field(factory=list)
    sandbox_name: str | None = None
    base_dir: str = "/app"
    #: a missing path fails the step (else it is listed under ``missing``)
    required: bool = True

    def check(self, view: PreflightView) -> list[str]:
        problems = super().check(view)
        if not self.paths or not all(isinstance(p, str) and p for p in self.paths):
            problems.append("needs 'paths', a list of files or folders to collect")
        return problems

    async def _files(self, sandbox: Sandbox, path: str) -> list[str] | None:
        import shlex

        quoted = shlex.quote(path)
        # names relative to the folder: a sandbox may map its paths (the local one does)
        listed = await sandbox.exec(f"if [ -d {quoted} ]; then cd {quoted} && find . -type f "
                                    f"| sort; elif [ -f {quoted} ]; then echo .; else exit 3; fi")
        if listed.exit_code == 3:
            return None
        if not listed.ok:
            raise StepError(f"cannot list {path}: {(listed.stderr or listed.stdout).strip()}")
        names = [line for line in listed.stdout.splitlines() if line]
        return [posixpath.normpath(posixpath.join(path, n)) for n in names]

    async def run(self, ctx: TaskContext) -> None:
        import hashlib

        from agent_env.bundles.ledger import blob_key
        from agent_env.runtime import current
        from agent_env.stores import ObjectExists

        sandbox = _sandbox(ctx, self.sandbox_name)
        objects = current().store("object")
        files: dict[str, dict[str, Any]] = {}
        missing = []
        for path in self.paths:
            found = await self._files(sandbox, _in(self.base_dir, path))
            if found is None:
                missing.append(path)
                continue
            for name in found:
                data = await sandbox.get_file(name)
                digest = hashlib.sha256(data).hexdigest()
                key = blob_key(digest)
                if not objects.exists(key):
                    try:
                        objects.put(key, data)
                    except ObjectExists:
                        pass
                files[name] = {"sha256": digest, "size": len(data), "key": key}
        ctx.outputs[self.id] = {"files": files, "missing": missing, "base_dir": self.base_dir}
        if missing and self.required:
            raise StepError(f"nothing to collect at {', '.join(missing)} (set required: false "
                            "to allow it)")
