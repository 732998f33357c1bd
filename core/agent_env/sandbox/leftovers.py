"""Leftovers: sandboxes, run records, temporary files and build images that runs which died left
behind, found by their labels and removed through the same contracts a run's teardown uses.
``agent-env gc`` is the command over it (see :mod:`agent_env.cli.gc_cmd` for the rules people
read); runners that clean up after their workers (ray) call :func:`find_leftovers` and
:func:`remove` themselves.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import attrs

from agent_env.errors import cause
from agent_env.sandbox.ownership import (
    EXPIRES_LABEL,
    OWNER_LABEL,
    STATE_LABEL,
    OwnerState,
    local_owner_state,
    owner_state,
    state_label,
)

RUN_LABEL = "agentenv.run"
#: A killed build's step images are removed once this old (seconds).
BUILD_LEFTOVER_AGE = 3600.0
#: How long one provider may take to list its sandboxes.
LIST_TIMEOUT = 30.0


# -- finding leftovers ----------------------------------------------------------------------------


@attrs.frozen
class Found:
    """A sandbox gc looked at, and its verdict: ``remove`` with ``why`` (or why it is kept)."""

    provider: str
    sandbox_id: str
    run: str | None
    remove: bool
    why: str
    live: bool = False
    sandbox: Any = attrs.field(default=None, eq=False, repr=False)

    def line(self) -> str:
        run = f" (run {self.run})" if self.run else ""
        return f"  {self.provider} {self.sandbox_id}{run}: {self.why}"


def _labels_of(sandbox: Any) -> dict[str, str]:
    labels = getattr(sandbox, "labels", None)
    if not isinstance(labels, dict):
        described = sandbox.describe()
        labels = described.get("labels") if isinstance(described, dict) else None
    return dict(labels or {})


def judge(provider: str, sandbox: Any, labels: dict[str, str], owner: OwnerState,
          now: float, state: str | None = None) -> Found:
    """Remove when expired or when the owner is gone; keep a live run's, or an unknown one's,
    and one made under another state root than ``state`` (this gc's) until it expires: that
    root's deployments ledger may keep it on purpose, and this gc cannot read it."""
    run = labels.get(RUN_LABEL)
    expires = labels.get(EXPIRES_LABEL)
    try:
        expires_at = float(expires) if expires else None
    except ValueError:
        expires_at = None
    sandbox_id = str(getattr(sandbox, "id", "?"))
    if expires_at is not None and expires_at < now:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(expires_at))
        return Found(provider, sandbox_id, run, True, f"expired at {stamp}", sandbox=sandbox)
    if owner.alive:
        return Found(provider, sandbox_id, run, False, f"live run: {owner.why}", live=True,
                     sandbox=sandbox)
    made_under = labels.get(STATE_LABEL)
    if made_under and state and made_under != state:
        until = "" if expires_at is None else " until it expires"
        return Found(provider, sandbox_id, run, False, (
            f"kept: made under state root {made_under}{until} (run gc with that state root "
            "to judge it)"), sandbox=sandbox)
    if owner.alive is False:
        return Found(provider, sandbox_id, run, True, owner.why, sandbox=sandbox)
    until = " and no expiry" if expires_at is None else ""
    return Found(provider, sandbox_id, run, False, f"kept: {owner.why}{until}", sandbox=sandbox)


#: The command group that tears a deployment of each kind down.
_COMMAND = {"env": "env", "agent": "a2a-agent"}


def stamp(moment: Any) -> str:
    return str(moment.strftime("%Y-%m-%dT%H:%M:%SZ"))


def apply_deployments(found: list[Found], ledger: Any) -> list[Found]:
    """Deployments outlive the process that made them (``env deploy`` exits): a sandbox the
    deployments ledger records is kept while the record is live and removed once it expired,
    whatever its owner label says. Sandboxes the ledger does not know keep their verdict."""
    judged = []
    for item in found:
        entry = ledger.for_sandbox(item.provider, item.sandbox_id)
        if entry is None:
            judged.append(item)
        elif entry.expired():
            judged.append(attrs.evolve(item, remove=True, live=False, why=(
                f"deployed {entry.kind} {entry.instance_id} expired at "
                f"{stamp(entry.expires_at)}")))
        else:
            judged.append(attrs.evolve(item, remove=False, live=False, why=(
                f"deployed {entry.kind} {entry.instance_id}, until "
                f"{stamp(entry.expires_at)} "
                f"(agent-env {_COMMAND[entry.kind]} teardown removes it)")))
    return judged


def stale_records(found: list[Found], skipped: list[str], ledger: Any) -> list[Any]:
    """Expired ledger records whose sandbox no listing showed: gone already, or on a provider
    that cannot list (gc then finds it by id, see :func:`remove_stale`). A record of a
    provider that did not answer is left for the next gc."""
    present = {(f.provider, f.sandbox_id) for f in found}
    unasked = {note.split(":", 1)[0] for note in skipped}
    return [entry for entry in ledger.expired()
            if (entry.provider, entry.sandbox_id) not in present
            and entry.provider not in unasked]


async def remove_stale(ledger: Any, stale: list[Any]) -> list[str]:
    """Terminate each stale deployment's sandbox if its provider still finds it by id, and drop
    its record; returns a line per one that could not be (its record is kept)."""
    from agent_env.deployments import tear_down

    problems = []
    for entry in stale:
        try:
            await tear_down(ledger, entry)
        except Exception as exc:  # one provider failing must not keep the others' up
            problems.append(f"Could not remove deployed {entry.kind} {entry.instance_id} "
                            f"({entry.provider} {entry.sandbox_id}): {cause(exc)}")
    return problems


def _local_verdict(sandbox: Any, now: float) -> Found:
    import json

    folder = Path(getattr(sandbox, "folder", ""))
    meta_path = folder / "sandbox.json"
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        created = meta_path.stat().st_mtime
    except (OSError, ValueError):
        meta, created = {}, now
    labels = dict(meta.get("labels") or {})
    owner = (owner_state(labels[OWNER_LABEL]) if OWNER_LABEL in labels
             else local_owner_state(meta.get("pid"), created))
    return judge("local", sandbox, labels, owner, now)


def listing_providers() -> dict[str, Any]:
    """Registered provider classes that implement ``list_sandboxes``."""
    from agent_env.runtime import current
    from agent_env.sandbox.base import SandboxProvider

    registry = current().host.registry("sandbox_provider")
    return {name: cls for name, cls in sorted(registry.items())
            if getattr(cls, "list_sandboxes", None) is not SandboxProvider.list_sandboxes}


async def find_leftovers(labels: dict[str, str]) -> tuple[list[Found], list[str]]:
    """Every sandbox carrying ``labels`` on every listing provider, judged; and the providers
    that could not be asked (with why)."""
    import asyncio

    from agent_env.tasks.sandboxes import open_provider

    now = time.time()
    state = state_label()
    skipped: list[str] = []

    async def ask(name: str, provider_class: Any) -> list[Found]:
        # Not availability(): some providers probe by booting something (tens of seconds);
        # listing what they made needs only their records or their API.
        from agent_env.errors import UserError

        try:
            provider = open_provider(name)
        except UserError:
            return []  # not configured here (no API key...), so it made nothing of ours
        try:
            sandboxes = await asyncio.wait_for(provider.list_sandboxes(dict(labels)),
                                               LIST_TIMEOUT)
        except TimeoutError:
            skipped.append(f"{name}: no answer within {LIST_TIMEOUT:g}s")
            return []
        except Exception as exc:  # one provider failing must not hide the others' leftovers
            skipped.append(f"{name}: {cause(exc)}")
            return []
        if name == "local":
            return [_local_verdict(s, now) for s in sandboxes]
        found = []
        for sandbox in sandboxes:
            own = _labels_of(sandbox)
            found.append(judge(name, sandbox, own, owner_state(own.get(OWNER_LABEL)), now,
                               state))
        return found

    batches = await asyncio.gather(*(ask(n, c) for n, c in listing_providers().items()))
    return [found for batch in batches for found in batch], skipped


async def remove(leftovers: list[Found]) -> list[tuple[Found, str]]:
    """Terminate every leftover side by side; returns the ones that failed, with why."""
    import asyncio

    outcomes = await asyncio.gather(*(f.sandbox.terminate() for f in leftovers),
                                    return_exceptions=True)
    return [(found, f"{type(out).__name__}: {out}") for found, out in
            zip(leftovers, outcomes, strict=True) if isinstance(out, BaseException)]


def stale_temporary_files() -> list[Path]:
    """The object store's temporary files whose writer is gone, where the store can tell
    (the local one; a cloud store's unfinished uploads are its own to expire)."""
    from agent_env.runtime import current

    finder = getattr(current().object_store, "stale_temporary_files", None)
    return list(finder()) if finder is not None else []


async def build_leftovers(*, dry_run: bool, older_than: float = BUILD_LEFTOVER_AGE
                          ) -> tuple[list[str], list[str]]:
    """What killed builds left, from every provider that prunes (``prune_build_leftovers``),
    removed unless ``dry_run``; and the providers that failed, with why."""
    import asyncio

    from agent_env.errors import UserError
    from agent_env.runtime import current
    from agent_env.sandbox.base import SandboxProvider
    from agent_env.tasks.sandboxes import open_provider

    registry = current().host.registry("sandbox_provider")
    names = [name for name, cls in sorted(registry.items())
             if getattr(cls, "prune_build_leftovers", None)
             is not SandboxProvider.prune_build_leftovers]
    problems: list[str] = []

    async def prune(name: str) -> list[str]:
        try:
            provider = open_provider(name)
            return await asyncio.wait_for(
                provider.prune_build_leftovers(older_than=older_than, dry_run=dry_run),
                LIST_TIMEOUT)
        except UserError:
            return []  # not configured here
        except Exception as exc:
            problems.append(f"{name}: {cause(exc)}")
            return []

    found = await asyncio.gather(*(prune(n) for n in names))
    return [f"  {name}: {line}" for name, lines in zip(names, found, strict=True)
            for line in lines], problems


def dead_run_records(labels: dict[str, str]) -> tuple[Any, list[Any]]:
    """The run records gc would mark ``abandoned``: with ``--label``, only a run the labels
    name (``agentenv.run=ID``), and none for other labels (records carry no labels)."""
    from agent_env.runtime import current
    from agent_env.tasks.records import StoredInstances, dead_runs

    instances = StoredInstances(current().document_store)
    if labels and set(labels) != {RUN_LABEL}:
        return instances, []
    return instances, dead_runs(instances, labels.get(RUN_LABEL))


# -- the command ----------------------------------------------------------------------------------


