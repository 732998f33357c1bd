"""Step types evals need: a unit-test verifier run in a sandbox, and collecting its files.

``run_container_unit_tests_verifier`` runs ``test_command`` (``bash -c``, in ``base_dir``) in a
deployed sandbox and scores it: from ``reward_file`` when one is given and the command wrote it
(a number, or JSON ``{"reward": x}``, clamped to [0, 1]), else 1 for exit code 0 and 0 for any
other. A reward file that cannot be read as a number is an error row (score 0), never a pass.

Before the tests run, ``setup_commands`` run in order (one failing fails the step) and the
reward file is removed, so a file the agent left there is never graded. ``env_vars`` reach every
command; ``result_paths`` are read back after the run into ``outputs[<id>].extracted_files``
(parsed JSON where it is JSON). Task files written for the reference framework say
``command``, ``timeout_sec`` and ``reward_path``: read as ``test_command``,
``timeout_seconds`` and ``reward_file``, and with ``reward_path`` a missing reward file scores
0 (``reward_required``), as there. With ``container_name`` (a container a
``run_docker_container`` step started in the sandbox) everything runs in that container, as
``user``; without it, a ``user`` other than root is a preflight problem (commands run as the
sandbox's own user). ``collect_artifacts`` takes ``container_name`` too.

``collect_artifacts`` copies files (a folder: every file under it) out of a sandbox (or an
env's, ``env_id``) into the object store, content-addressed as the ledger stores bundle files
(``blobs/sha256/<hex>``), and lists them in the run's record (``outputs[<step id>].files``:
path, sha256, size, key). The paths come from the run's seed when it has ``artifacts_key``
(a comma-separated list), else from ``paths``; ``exclude_basenames`` leaves files of those
names out. The reference's ``artifact_paths`` and ``base_path`` are read as ``paths`` and
``base_dir`` (``/app/artifact`` when only ``artifact_paths`` is given, its default).
"""

from __future__ import annotations

import json
import posixpath
import re
from typing import TYPE_CHECKING, Any

import attrs

from agent_env.tasks.scores import ScoreRow
from agent_env.tasks.steps import (
    PreflightView,
    Step,
    StepError,
    exec_for_step,
    renamed_keys,
)

if TYPE_CHECKING:
    from agent_env.sandbox.base import Sandbox
    from agent_env.tasks.context import TaskContext


_POSIX_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\Z")


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
    #: commands run first, in order, in ``base_dir``; one that fails fails the step
    setup_commands: list[str] = attrs.field(factory=list)
    #: added to the environment of every command
    env_vars: dict[str, str] = attrs.field(factory=dict)
    #: files read back after the run into the step's output (``extracted_files``)
    result_paths: list[str] = attrs.field(factory=list)
    #: a missing reward file scores 0 (else the exit code decides)
    reward_required: bool = False
    user: str = "root"
    container_name: str | None = None

    @classmethod
    def adapt(cls, raw: dict[str, Any]) -> dict[str, Any]:
        if "reward_path" in raw and "reward_required" not in raw:
            raw = {**raw, "reward_required": raw.get("reward_path") is not None}
        return renamed_keys(raw, {"command": "test_command", "timeout_sec": "timeout_seconds",
                                  "reward_path": "reward_file"})

    def check(self, view: PreflightView) -> list[str]:
        problems = super().check(view)
        if not self.test_command.strip():
            problems.append("needs 'test_command', the command that runs the tests")
        bad = [k for k in self.env_vars if not _POSIX_NAME.match(k)]
        if bad:
            problems.append(f"env_vars: {', '.join(map(repr, bad))} is not a variable name "
                            "([A-Za-z_][A-Za-z0-9_]*)")
        if self.reward_required and not self.reward_file:
            problems.append("reward_required needs reward_file, the file the tests write")
        if self.user != "root" and self.container_name is None:
            problems.append(f"user '{self.user}': commands run as the sandbox's own user; a "
                            "user is taken in a container the task started (container_name)")
        return problems

    async def _setup(self, sandbox: Sandbox) -> None:
        for number, command in enumerate(self.setup_commands, start=1):
            done = await sandbox.exec(command, cwd=self.base_dir, env=self.env_vars or None,
                                      timeout=float(self.timeout_seconds))
            if not done.ok:
                tail = (done.stderr or done.stdout).strip()[-300:]
                raise StepError(f"setup command {number} of {len(self.setup_commands)} exited "
                                f"{done.exit_code}: {tail}")

    async def _extracted(self, sandbox: Sandbox) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for path in self.result_paths:
            try:
                text = (await sandbox.get_file(_in(self.base_dir, path))).decode(
                    errors="replace")
            except FileNotFoundError:
                out[path] = None
                continue
            try:
                out[path] = json.loads(text)
            except ValueError:
                out[path] = text
        return out

    async def run(self, ctx: TaskContext) -> None:
        import shlex

        sandbox = ctx.work_target(self.sandbox_name, container_name=self.container_name,
                                  user=self.user if self.container_name else None)
        criterion = {"type": "unit_tests", "test_command": self.test_command}
        await self._setup(sandbox)
        if self.reward_file:  # a reward the agent left behind is never graded
            await sandbox.exec(f"rm -f -- {shlex.quote(_in(self.base_dir, self.reward_file))}")
        try:
            result = await exec_for_step(sandbox, self.test_command, cwd=self.base_dir,
                                         env=self.env_vars or None,
                                         timeout=float(self.timeout_seconds))
        except TimeoutError:
            row = ScoreRow(0, 0.0, False, f"timed out after {self.timeout_seconds:g}s",
                           criterion=criterion)
            ctx.record_verification(self, self.verifier_id, [row], "all_pass")
            return
        output = (result.stdout + result.stderr).strip()[-500:]
        ctx.outputs[self.id] = {"exit_code": result.exit_code, "output_tail": output}
        if self.result_paths:
            ctx.outputs[self.id]["extracted_files"] = await self._extracted(sandbox)
        score, why = (1.0 if result.ok else 0.0), f"tests exited {result.exit_code}"
        if self.reward_file:
            path = _in(self.base_dir, self.reward_file)
            try:
                text = (await sandbox.get_file(path)).decode(errors="replace")
            except FileNotFoundError:
                if self.reward_required:
                    score, why = 0.0, f"{why}; no reward file {path}, scored 0"
                else:
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
    #: collect from this deployed env's sandbox instead
    env_id: str | None = None
    base_dir: str = "/app"
    #: a missing path fails the step (else it is listed under ``missing``)
    required: bool = True
    #: the seed value listing the paths (comma-separated) for this run, when it has one
    artifacts_key: str = "expected_artifacts"
    #: files of these names are left out
    exclude_basenames: list[str] = attrs.field(factory=list)
    agent_name: str | None = None
    container_name: str | None = None
    manifest_step_id: str | None = None
    universe_id_suffix: str | None = None

    @classmethod
    def adapt(cls, raw: dict[str, Any]) -> dict[str, Any]:
        if "artifact_paths" in raw and "base_path" not in raw and "base_dir" not in raw:
            raw = {**raw, "base_dir": "/app/artifact"}  # where the reference looks by default
        return renamed_keys(raw, {"artifact_paths": "paths", "base_path": "base_dir"})

    def check(self, view: PreflightView) -> list[str]:
        problems = super().check(view)
        if not all(isinstance(p, str) and p for p in self.paths):
            problems.append("paths must be a list of files or folders to collect")
        unsupported = {
            "agent_name": "collecting from an agent's container is not supported here; give "
                          "sandbox_name (the sandbox the agent works in)",
            "manifest_step_id": "paths from an agent's declared manifest are not supported "
                                "here; list them in paths",
            "universe_id_suffix": "file-artifact universes are not supported here",
        }
        for key, why in unsupported.items():
            if getattr(self, key) is not None:
                problems.append(f"{key}: {why}")
        return problems

    def wanted(self, ctx: TaskContext) -> list[str]:
        """This run's paths: the seed's ``artifacts_key`` list when it has one, else ``paths``."""
        listed = (ctx.seed or {}).get(self.artifacts_key)
        if isinstance(listed, str) and listed.strip():
            return [p.strip() for p in listed.split(",") if p.strip()]
        if not self.paths:
            raise StepError(f"nothing to collect: give paths, or a seed value "
                            f"'{self.artifacts_key}' listing them")
        return list(self.paths)

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

        sandbox = ctx.work_target(self.sandbox_name, self.env_id, self.container_name)
        objects = current().object_store
        files: dict[str, dict[str, Any]] = {}
        missing = []
        for path in self.wanted(ctx):
            found = await self._files(sandbox, _in(self.base_dir, path))
            if found is None:
                missing.append(path)
                continue
            for name in found:
                if posixpath.basename(name) in self.exclude_basenames:
                    continue
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
