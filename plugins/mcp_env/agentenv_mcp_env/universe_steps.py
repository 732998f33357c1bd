"""Is a universe portable? A load/export round trip, and the verdict that combines it with a
judge's.

Why: an env author who ships seed data (an ``environment_universe``) wants to know that what
goes in comes out: that each server's ``data/add`` takes the universe's state and its
``data/get`` gives it back, and that loading what it gave back changes nothing. A state that
drifts on the way round cannot be snapshotted, rewound or handed to the next task.

* ``verify_universe_load_export_roundtrip`` loads ``universe_artifact_id`` into the env (as
  ``load_artifact`` does), exports the state (``snapshot_env``: export 1), loads export 1,
  exports again (export 2), and compares, per server: the universe against export 1 where the
  universe holds the same form (a universe made by ``snapshot_env``; another form is compared export
  against export only, and said so), and export 1 against export 2 (idempotency). Lists compare
  as multisets (a server may return rows in another order). One row per server; the output
  keeps each server's differences and both exports' artifact ids.
* ``combine_universe_verdicts`` merges that programmatic verdict with a judge's
  (``judge_verifier_id``, e.g. a ``rubrics_verifier`` that read the exports): compatible only
  when both say so; with no judge recorded the verdict is kept and marked
  ``agent_judge_skipped``. The reference persists it in its env-artifact store; here the run's
  record (output and verification) is where it lives.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import attrs

from agent_env.api import (
    EnvDataError,
    PreflightView,
    ScoreRow,
    Step,
    StepError,
    seed_environments,
)

if TYPE_CHECKING:
    from agent_env.api import TaskContext

#: Differences shown per server and comparison (the count is always kept).
SHOWN = 20


def _canon(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def differences(first: Any, second: Any, path: str = "$") -> list[str]:
    """Where two JSON values differ (lists as multisets), as ``path: what`` lines."""
    if isinstance(first, dict) and isinstance(second, dict):
        found: list[str] = []
        for key in sorted(set(first) | set(second), key=str):
            where = f"{path}.{key}"
            if key not in second:
                found.append(f"{where}: missing from the second")
            elif key not in first:
                found.append(f"{where}: missing from the first")
            else:
                found += differences(first[key], second[key], where)
        return found
    if isinstance(first, list) and isinstance(second, list):
        a, b = sorted(map(_canon, first)), sorted(map(_canon, second))
        if a == b:
            return []
        if len(a) != len(b):
            return [f"{path}: {len(a)} items against {len(b)}"]
        odd = [x for x in a if x not in b]
        return [f"{path}: {len(odd)} of {len(a)} items differ, e.g. {odd[0][:120]}"]
    return [] if first == second else [f"{path}: {_canon(first)[:80]} against "
                                       f"{_canon(second)[:80]}"]


def _json(data: bytes) -> Any:
    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError):
        return None


@attrs.define(kw_only=True)
class VerifyUniverseLoadExportRoundtrip(Step):
    """Load a universe, export, reload the export, export again; compare (see the module)."""

    type = "verify_universe_load_export_roundtrip"
    example = {
        'id': 'roundtrip',
        'type': 'verify_universe_load_export_roundtrip',
        'env_id': 'notes',
        'universe_artifact_id': 'notes-seed',
    }
    entity_fields = {"env_id": "envs", "universe_artifact_id": "artifacts"}

    env_id: str
    universe_artifact_id: str
    universe_artifact_version: int | None = None
    verifier_id: str | None = None
    #: The reference's: also bundle the three states for a judge (here the two exports are
    #: stored artifacts already, named in the output, so a judge can read them).
    emit_file_artifact_universe: bool = False
    #: The reference's: whether this step owns the verdict's record. Here it is always
    #: recorded in the run; ``false`` leaves the final word to ``combine_universe_verdicts``.
    persist_result: bool = True

    async def run(self, ctx: TaskContext) -> None:
        from agentenv_mcp_env.control_steps import SnapshotEnv

        universe = await ctx.artifact(self.universe_artifact_id, self.universe_artifact_version)
        if universe.type != "environment_universe":
            raise StepError(f"artifact '{self.universe_artifact_id}' is a {universe.type} "
                            "artifact, not an environment_universe")
        exports: list[Any] = []
        source = universe
        for round_ in (1, 2):
            try:  # as load_artifact into the env does it
                await seed_environments(ctx.env(self.env_id), source, progress=ctx.note)
            except EnvDataError as exc:
                raise StepError(f"loading {source.id} (round {round_}): {exc}") from None
            export = SnapshotEnv(id=f"{self.id}.export{round_}", env_id=self.env_id,
                                 snapshot_id=f"snapshots/{ctx.instance_id}/{self.id}/"
                                             f"export{round_}")
            await export.run(ctx)
            saved = ctx.outputs.pop(export.id)
            source = await ctx.artifact(saved["artifact_id"], saved["version"])
            exports.append(source)
        original, first, second = (a.environments() for a in (universe, *exports))
        services: dict[str, Any] = {}
        rows = []
        for index, name in enumerate(sorted(original)):
            if name not in first or name not in second:
                services[name] = {"compatible": False, "issues": [
                    f"{name}: loaded, but its server gave no state back (no data/get?)"]}
            else:
                same_form = original[name].path == first[name].path
                load_issues = differences(_json(original[name].data), _json(first[name].data),
                                          "universe→export1") if same_form else []
                again = differences(_json(first[name].data), _json(second[name].data),
                                    "export1→export2")
                issues = load_issues + again
                services[name] = {"compatible": not issues, "issue_count": len(issues),
                                  "issues": issues[:SHOWN],
                                  "load_compared": same_form}
            entry = services[name]
            why = ("state survives the round trip" if entry["compatible"] else
                   "; ".join(entry["issues"][:3]))
            if entry["compatible"] and not entry.get("load_compared", True):
                why += " (the universe is in another form: export 1 and 2 compared)"
            rows.append(ScoreRow(index, 1.0 if entry["compatible"] else 0.0,
                                 bool(entry["compatible"]), why, criterion={"id": name}))
        compatible = all(s["compatible"] for s in services.values())
        ctx.outputs[self.id] = {
            "compatible": compatible, "services": services,
            "exported_universe_artifact_id": exports[0].id,
            "exported_universe_artifact_version": exports[0].version,
            "second_export_artifact_id": exports[1].id, "persisted": self.persist_result}
        if rows:
            ctx.record_verification(self, self.verifier_id, rows, "all_pass")


@attrs.define(kw_only=True)
class CombineUniverseVerdicts(Step):
    """The round trip's verdict, gated by a judge's (see the module)."""

    type = "combine_universe_verdicts"
    example = {
        'id': 'verdict',
        'type': 'combine_universe_verdicts',
        'env_id': 'notes',
        'universe_artifact_id': 'notes-seed',
        'judge_verifier_id': 'judge',
    }
    entity_fields = {"env_id": "envs", "universe_artifact_id": "artifacts"}

    env_id: str
    universe_artifact_id: str
    universe_artifact_version: int | None = None
    judge_verifier_id: str
    #: The roundtrip step whose verdict this combines (default: the one of this env).
    roundtrip_step_id: str | None = None
    verifier_id: str | None = None

    def check(self, view: PreflightView) -> list[str]:
        problems = super().check(view)
        if self.roundtrip_step_id is not None and self.roundtrip_step_id not in view.step_ids:
            problems.append(f"roundtrip_step_id '{self.roundtrip_step_id}' is no step of this "
                            "task")
        return problems

    async def run(self, ctx: TaskContext) -> None:
        verdict = None
        for key, output in ctx.outputs.items():
            if isinstance(output, dict) and "services" in output and "compatible" in output \
                    and self.roundtrip_step_id in (None, key):
                verdict = output
        if verdict is None:
            raise StepError("no verify_universe_load_export_roundtrip verdict is recorded in "
                            "this run (run one before this step)")
        combined = dict(verdict)
        judge = ctx.verifications.get(self.judge_verifier_id)
        if judge is None:
            combined["agent_judge_skipped"] = True
            ctx.note(f"{self.type}: no verdict of '{self.judge_verifier_id}' is recorded; the "
                     "round trip's verdict stands ungated")
        else:
            combined["agent_judge"] = {"verifier_id": self.judge_verifier_id,
                                       "score": judge.score}
            combined["compatible"] = bool(verdict["compatible"]) and judge.score >= 1.0
        ctx.outputs[self.id] = combined
        why = "the round trip" + (" and the judge" if judge is not None else "")
        ok = bool(combined["compatible"])
        ctx.record_verification(self, self.verifier_id, [ScoreRow(
            0, 1.0 if ok else 0.0, ok, f"{why} {'agree it is' if ok else 'say it is not'} "
            "compatible" if judge is not None else f"{why}: "
            + ("compatible" if ok else "not compatible"),
            criterion={"id": "universe_compatible"})], "all_pass")
