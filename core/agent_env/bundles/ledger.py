"""The content-hash ledger: a bundle's entities written as versions only when they changed.

File contents go to the object store under content-addressed keys (``blobs/sha256/<hex>``,
write-once, shared by every version and bundle); records go to the versioned entity store with
the hash of what they hold, so a rerun writes nothing (``v1, unchanged``) and a change writes
the next version with its reason (``v2 (files changed: hello.txt)``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from agent_env.bundles.model import AgentEntry, ArtifactEntry, BundleFile, EnvEntry
from agent_env.bundles.plan import BundlePlan

BLOB_PREFIX = "blobs/sha256/"


def blob_key(sha256: str) -> str:
    return f"{BLOB_PREFIX}{sha256}"


@attrs.frozen
class LedgerLine:
    """One entity's fate: ``label: v2 (reason)`` or ``label: v1, unchanged``."""

    label: str
    kind: str
    id: str
    version: int
    created: bool
    reason: str | None = None
    dry_run: bool = False

    def __str__(self) -> str:
        if not self.created:
            return f"{self.label}: v{self.version}, unchanged"
        prefix = "would write " if self.dry_run else ""
        return f"{self.label}: {prefix}v{self.version} ({self.reason or 'changed'})"


@attrs.frozen
class LedgerResult:
    lines: tuple[LedgerLine, ...]
    #: kind -> {id: version} written or reused, which the run pins
    versions: dict[str, dict[str, int]]

    def version(self, kind: str, entity_id: str) -> int | None:
        return self.versions.get(kind, {}).get(entity_id)


def _files_body(files: Sequence[BundleFile]) -> dict[str, dict[str, Any]]:
    return {f.path: {"sha256": f.sha256, "size": f.size, "mode": f.mode, "key": blob_key(f.sha256)}
            for f in files}


def _files_hash_input(kind: str, files: Sequence[BundleFile], extra: Any = None) -> Any:
    return {"type": kind, "files": {f.path: [f.sha256, f.mode] for f in files}, "extra": extra}


def files_reason(old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> str:
    """``files changed: a; files added: b; files removed: c`` between two file tables."""
    if old is None:
        return "new"
    changed = sorted(p for p in new if p in old and (old[p].get("sha256"), old[p].get("mode"))
                     != (new[p]["sha256"], new[p]["mode"]))
    added = sorted(p for p in new if p not in old)
    removed = sorted(p for p in old if p not in new)
    parts = [f"files {verb}: {', '.join(names)}" for verb, names in
             (("changed", changed), ("added", added), ("removed", removed)) if names]
    return "; ".join(parts) or "settings changed"


def steps_reason(old: Sequence[Any] | None, new: Sequence[Any]) -> str:
    if old is None:
        return "new"
    def by_id(steps: Sequence[Any]) -> dict[str | None, Any]:  # a step may lack an id
        return {s.get("id"): s for s in steps if isinstance(s, dict)}
    before, after = by_id(old), by_id(new)
    changed = [i for i in after if i in before and before[i] != after[i]]
    added = [i for i in after if i not in before]
    removed = [i for i in before if i not in after]
    parts = [f"steps {verb}: {', '.join(map(str, names))}" for verb, names in
             (("changed", changed), ("added", added), ("removed", removed)) if names]
    return "; ".join(parts) or "step order changed"


def referenced_envs(bundle: Any, wanted: set[str]) -> set[str]:
    """The bundle's envs that the ``wanted`` ones name (a ``multi`` env's children), and the
    ones those name: stored with them, so a deploy finds every one (the env type says which,
    :meth:`agent_env.env_types.EnvType.referenced_envs`)."""
    if not wanted:
        return set()
    from agent_env.runtime import current

    types = current().host.registry("env_type")
    by_id = {env.id: env for env in bundle.envs}
    found: set[str] = set()
    todo = [by_id[i] for i in wanted if i in by_id]
    while todo:
        env = todo.pop()
        kind = types.get(env.type)
        for name in kind.referenced_envs(env.id, env.settings) if kind is not None else ():
            if name in by_id and name not in found and name not in wanted:
                found.add(name)
                todo.append(by_id[name])
    return found


class Ledger:
    """Writes a plan's entities; ``dry_run`` computes the same lines and writes nothing."""

    def __init__(self, versioned: Any, objects: Any, *, dry_run: bool = False) -> None:
        self.versioned = versioned
        self.objects = objects
        self.dry_run = dry_run
        self.lines: list[LedgerLine] = []
        self.versions: dict[str, dict[str, int]] = {}

    def write_plan(self, plan: BundlePlan) -> LedgerResult:
        bundle = plan.bundle
        wanted: dict[str, set[str]] = {}
        for task in plan.tasks:
            for kind, ids in task.references.items():
                wanted.setdefault(kind, set()).update(ids)
        if not bundle.tasks and any(bundle.aliases.values()):
            # a library bundle (aliases, no tasks): what it holds is what others use
            wanted["artifacts"] = {a.id for a in bundle.artifacts}
            wanted["envs"] = {e.id for e in bundle.envs}
            wanted["agents"] = {a.id for a in bundle.agents}
        for artifact in bundle.artifacts:
            if artifact.id in wanted.get("artifacts", set()):
                self.write_files_entity("artifacts", artifact)
        envs = wanted.get("envs", set())
        envs |= referenced_envs(bundle, envs)
        for env in bundle.envs:
            if env.id in envs:
                self.write_files_entity("envs", env)
        for agent in bundle.agents:
            if agent.id in wanted.get("agents", set()):
                self.write_files_entity("agents", agent)
        for task in plan.tasks:
            body: dict[str, Any] = {"name": task.entry.name, "label": task.entry.label,
                                    "steps": list(task.spec.raw_steps)}
            self._put("tasks", task.entry.id, task.entry.label, body, None,
                      lambda old, body=body: steps_reason(old and old.get("steps"),
                                                          body["steps"]))
        id_of = {t.name: t.id for t in bundle.tasks}
        for planned in plan.evals:
            tasks = [{"task_id": id_of[n], "task_version": self.versions["tasks"].get(id_of[n])}
                     for n in planned.task_names]
            body = {"name": planned.entry.name, "type": planned.entry.type, "tasks": tasks}
            self._put("evals", planned.entry.id, planned.entry.label, body, None,
                      lambda old: "new" if old is None else "tasks changed")
        return LedgerResult(tuple(self.lines), self.versions)

    def write_files_entity(self, kind: str,
                           entry: ArtifactEntry | EnvEntry | AgentEntry) -> None:
        from agent_env.stores import ObjectExists
        from agent_env.stores.versioned import content_hash

        files = _files_body(entry.files)
        extra: dict[str, Any] | None = None
        body: dict[str, Any] = {"name": entry.name, "type": entry.type, "files": files}
        if isinstance(entry, EnvEntry):
            extra = {"image": entry.image, "environment_name": entry.environment_name}
            if entry.settings:  # left out when empty: an env stored before keeps its hash
                extra["settings"] = entry.settings
            body.update(extra)
        elif isinstance(entry, ArtifactEntry) and (entry.environment_name or entry.cli):
            extra = ({"environment_name": entry.environment_name} if entry.environment_name
                     else {"cli": entry.cli.to_json() if entry.cli else None})
            body.update(extra)
        digest = content_hash(_files_hash_input(entry.type, entry.files, extra))
        latest = self.versioned.get(kind, entry.id)
        if latest is not None and latest.content_hash == digest:
            self._record(kind, entry.id, entry.label, latest.version, False)
            return
        if not self.dry_run:
            for item in entry.files:
                key = blob_key(item.sha256)
                if self.objects.exists(key):
                    continue
                try:
                    self.objects.put(key, item.source.read_bytes())
                except ObjectExists:  # another run wrote the same content first
                    pass
        reason = files_reason(latest.body.get("files") if latest else None, files)
        self._put(kind, entry.id, entry.label, body, digest, lambda _old: reason)

    def _put(
        self, kind: str, entity_id: str, label: str, body: dict[str, Any], digest: str | None,
        reason_for: Any,
    ) -> None:
        from agent_env.stores.versioned import content_hash

        digest = digest or content_hash(body)
        latest = self.versioned.get(kind, entity_id)
        if latest is not None and latest.content_hash == digest:
            self._record(kind, entity_id, label, latest.version, False)
            return
        reason = reason_for(latest.body if latest else None)
        if self.dry_run:
            self._record(kind, entity_id, label, (latest.version if latest else 0) + 1, True,
                         reason)
            return
        record, created = self.versioned.put_if_changed(
            kind, entity_id, body, reason=reason, content_hash=digest
        )
        self._record(kind, entity_id, label, record.version, created, record.reason or reason)

    def _record(self, kind: str, entity_id: str, label: str, version: int, created: bool,
                reason: str | None = None) -> None:
        self.versions.setdefault(kind, {})[entity_id] = version
        self.lines.append(LedgerLine(label, kind, entity_id, version, created, reason,
                                     self.dry_run))
