"""Verifiers that need no env: ``verify_sandbox`` probes and ``aggregate_verifiers``.

``verify_sandbox`` understands four criterion types; others are kept as skipped rows (so one
criteria list can be shared with response-side verifiers) and do not count in the score:

* ``probe_file_exists`` / ``probe_dir_exists``: every path of ``paths`` (under ``base_dir``);
* ``probe_file_contains``: the first path's text matches ``expected`` (a regex, searched);
* ``bash_cmd_succeeds``: ``bash -c <bash_cmd>`` in ``base_dir`` exits 0.

Each probe has ``shell_timeout_seconds`` (120 s by default).
"""

from __future__ import annotations

import posixpath
import re
from typing import TYPE_CHECKING, Any

import attrs

from agent_env.tasks.scores import AGGREGATORS, ScoreRow
from agent_env.tasks.steps import PreflightView, Step, StepError, exec_for_step

if TYPE_CHECKING:
    from agent_env.sandbox.base import Sandbox
    from agent_env.tasks.context import TaskContext

PROBES = ("probe_file_exists", "probe_dir_exists", "probe_file_contains", "bash_cmd_succeeds")
DEFAULT_SHELL_TIMEOUT = 120


def _check_aggregator(name: str) -> list[str]:
    if name in AGGREGATORS:
        return []
    return [f"score_aggregator '{name}' is not known (known: {', '.join(AGGREGATORS)})"]


@attrs.define(kw_only=True)
class VerifySandbox(Step):
    type = "verify_sandbox"

    criteria: list[dict[str, Any]] = attrs.field(factory=list)
    sandbox_name: str | None = None
    agent_name: str | None = None
    base_dir: str = "/app"
    shell_timeout_seconds: float = DEFAULT_SHELL_TIMEOUT
    score_aggregator: str = "all_pass"
    verifier_id: str | None = None

    def check(self, view: PreflightView) -> list[str]:
        problems = super().check(view) + _check_aggregator(self.score_aggregator)
        for index, criterion in enumerate(self.criteria):
            kind = criterion.get("type")
            where = f"criteria[{index}]"
            if kind in ("probe_file_exists", "probe_dir_exists", "probe_file_contains"):
                paths = criterion.get("paths")
                if not (isinstance(paths, list) and paths and
                        all(isinstance(p, str) for p in paths)):
                    problems.append(f"{where} ({kind}) needs 'paths', a list of paths")
            if kind == "probe_file_contains" and not isinstance(criterion.get("expected"), str):
                problems.append(f"{where} (probe_file_contains) needs 'expected', a regex")
            if kind == "probe_file_contains" and isinstance(criterion.get("expected"), str):
                try:
                    re.compile(criterion["expected"])
                except re.error as exc:
                    problems.append(f"{where}: 'expected' is not a valid regex ({exc})")
            if kind == "bash_cmd_succeeds" and not isinstance(criterion.get("bash_cmd"), str):
                problems.append(f"{where} (bash_cmd_succeeds) needs 'bash_cmd', a command")
        return problems

    async def run(self, ctx: TaskContext) -> None:
        sandbox = ctx.target_sandbox(self.sandbox_name)
        rows = []
        for index, criterion in enumerate(self.criteria):
            rows.append(await self._evaluate(sandbox, index, criterion))
        ctx.record_verification(self, self.verifier_id, rows, self.score_aggregator)

    async def _evaluate(self, sandbox: Sandbox, index: int, criterion: dict[str, Any]) -> ScoreRow:
        kind = criterion.get("type")
        weight = float(criterion.get("weight", 1.0))
        if kind not in PROBES:
            return ScoreRow(index, 0.0, False, f"'{kind}' is not checked by verify_sandbox",
                            skipped=True, weight=weight, criterion=criterion)
        try:
            passed, why = await self._probe(sandbox, kind, criterion)
        except TimeoutError as exc:
            passed, why = False, str(exc)
        return ScoreRow(index, 1.0 if passed else 0.0, passed, why, weight=weight,
                        criterion=criterion)

    def _path(self, path: str) -> str:
        return path if posixpath.isabs(path) else posixpath.join(self.base_dir, path)

    async def _probe(
        self, sandbox: Sandbox, kind: str, criterion: dict[str, Any]
    ) -> tuple[bool, str]:
        import asyncio
        import shlex

        timeout = float(self.shell_timeout_seconds)
        if kind == "bash_cmd_succeeds":
            command = criterion["bash_cmd"]
            result = await exec_for_step(sandbox, command, cwd=self.base_dir, timeout=timeout)
            if result.ok:
                return True, f"'{command}' exited 0"
            output = (result.stderr or result.stdout).strip()[-300:]
            return False, f"'{command}' exited {result.exit_code}" + (
                f": {output}" if output else "")
        paths = [self._path(p) for p in criterion["paths"]]
        if kind in ("probe_file_exists", "probe_dir_exists"):
            flag = "-f" if kind == "probe_file_exists" else "-d"
            what = "file" if flag == "-f" else "folder"
            for path in paths:
                result = await exec_for_step(sandbox, f"test {flag} {shlex.quote(path)}",
                                             timeout=timeout)
                if not result.ok:
                    return False, f"{path} is not a {what}"
            return True, f"every path is a {what}"
        path = paths[0]
        try:
            data = await asyncio.wait_for(sandbox.get_file(path), timeout)
        except FileNotFoundError:
            return False, f"{path} does not exist"
        text = data.decode(errors="replace")
        if re.search(criterion["expected"], text):
            return True, f"{path} matches {criterion['expected']!r}"
        return False, f"{path} does not match {criterion['expected']!r}"


@attrs.define(kw_only=True)
class AggregateVerifiers(Step):
    """One score from the rows of several verifiers (weighted_average by default)."""

    type = "aggregate_verifiers"
    example = {
        'id': 'total',
        'type': 'aggregate_verifiers',
        'verifier_ids': ['answer', 'files'],
        'score_aggregator': 'weighted_average',
    }

    verifier_ids: list[str] = attrs.field(factory=list)
    score_aggregator: str = "weighted_average"
    verifier_id: str | None = None

    def check(self, view: PreflightView) -> list[str]:
        return super().check(view) + _check_aggregator(self.score_aggregator)

    async def run(self, ctx: TaskContext) -> None:
        missing = [v for v in self.verifier_ids if v not in ctx.verifications]
        if missing:
            have = ", ".join(sorted(ctx.verifications)) or "none"
            raise StepError(f"no verification {', '.join(missing)} to aggregate (have: {have})")
        rows: list[ScoreRow] = []
        for verifier_id in self.verifier_ids:
            for row in ctx.verifications[verifier_id].results:
                rows.append(attrs.evolve(row, criterion_index=len(rows)))
        ctx.record_verification(self, self.verifier_id, rows, self.score_aggregator)


#: The gates ``validation_gate_aggregator`` requires when a task names none (the reference's).
DEFAULT_REQUIRED_GATES = ("mcp_tool_schema", "mcp_tool_correctness")


@attrs.define(kw_only=True)
class ValidationGateAggregator(Step):
    """Roll the verdicts of the validation gates (verifier ids) into one go/no-go.

    A gate passes when its verifier scored 1, is skipped when every row of it was skipped
    (nothing to check: advisory, never blocking), and counts as failed when no verifier of
    that id ran (fail-closed). Record-only, as the reference's: the summary is the step's
    output (``passed``, ``failed_gates``, ``missing_gates``, ``skipped_gates``); whoever runs
    the validation decides what a failed gate means.
    """

    type = "validation_gate_aggregator"
    example = {'id': 'gate', 'type': 'validation_gate_aggregator', 'env_id': 'notes'}
    entity_fields = {"env_id": "envs"}

    env_id: str | None = None
    required_gates: list[str] = attrs.field(factory=lambda: list(DEFAULT_REQUIRED_GATES))

    def check(self, view: PreflightView) -> list[str]:
        problems = super().check(view)
        if not isinstance(self.required_gates, list) or not self.required_gates or not all(
                isinstance(g, str) and g for g in self.required_gates):
            problems.append("required_gates must be a non-empty list of verifier ids")
        return problems

    async def run(self, ctx: TaskContext) -> None:
        failed, missing, skipped = [], [], []
        for gate in self.required_gates:
            found = ctx.verifications.get(gate)
            if found is None:
                missing.append(gate)
            elif found.results and all(row.skipped for row in found.results):
                skipped.append(gate)
            elif found.score < 1:
                failed.append(gate)
        ctx.outputs[self.id] = {"passed": not failed and not missing,
                                "required_gates": list(self.required_gates),
                                "failed_gates": failed, "missing_gates": missing,
                                "skipped_gates": skipped}
