"""Run groups: an eval run's slots (task by sample) in the document store, claimed one by one.

A group (collection ``eval_run_groups``) fixes what runs: the eval and its pinned task versions,
``k`` and the slots. Each slot has a document (``eval_run_slots``) that a process claims before
running it, by inserting it or, for a slot left behind, by a compare-and-set on its revision;
whoever loses the race skips the slot, so two processes resuming one group never run a slot
twice. A claim whose owner process is gone (same host, pid not alive) or that was released (Ctrl-C)
is taken over. A finished slot keeps its instance id and outcome; a resume reuses a slot whose
outcome completed (passed, failed, scored below 1, unscored) and runs the rest again (``error``
and ``cancelled`` included).
"""

from __future__ import annotations

import os
import secrets
import socket
import string
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from agent_env.errors import UserError
from agent_env.tasks.scores import COMPLETED

if TYPE_CHECKING:
    from agent_env.evals.stats import RunSummary

GROUPS, SLOTS = "eval_run_groups", "eval_run_slots"
CLAIMED, DONE, RELEASED = "claimed", "done", "released"
#: outcomes of a run that completed: its result stands and a resume reuses it
_ALPHABET = string.ascii_lowercase + string.digits


@attrs.frozen
class Slot:
    """One run to make: the ``sample``-th run of a task version (with its seed, for batches)."""

    index: int
    task_id: str
    task_version: int
    sample: int
    seed: Mapping[str, str] | None = None

    @property
    def label(self) -> str:
        return f"{self.task_id} v{self.task_version} #{self.sample}"


@attrs.frozen
class Group:
    group_id: str
    kind: str  # "eval", "task" (task run --k) or "batch" (task run-batch)
    subject_id: str
    subject_version: int | None
    k: int
    slots: tuple[Slot, ...]

    def to_document(self) -> dict[str, Any]:
        return {"_id": self.group_id, "kind": self.kind, "subject_id": self.subject_id,
                "subject_version": self.subject_version, "k": self.k,
                "slots": [attrs.asdict(s) for s in self.slots]}

    @classmethod
    def from_document(cls, doc: Mapping[str, Any]) -> Group:
        import cattrs

        try:
            return cattrs.structure({**doc, "group_id": doc["_id"]}, cls)
        except (KeyError, TypeError, ValueError, cattrs.BaseValidationError) as exc:
            raise UserError(f"run group {doc.get('_id')!r} is corrupt in the store ({exc}); "
                            "start a new run without --resume") from None


def readable_slot(doc: Mapping[str, Any]) -> bool:
    """Whether a slot row holds what a resume reads, each of its type (a row edited by hand,
    or half-written by another tool, must not stop a resume with a traceback)."""
    state, rev, index = doc.get("state"), doc.get("rev"), doc.get("index")
    return (state in (CLAIMED, DONE, RELEASED) and type(rev) is int and type(index) is int
            and isinstance(doc.get("owner", ""), str | None)
            and isinstance(doc.get("instance_id"), str | None)
            and isinstance(doc.get("outcome"), str | None)
            and isinstance(doc.get("attempts", []), list)
            and all(isinstance(a, str) for a in doc.get("attempts") or []))


def log_corrupt_slot(key: str) -> None:
    from agent_env.logs import get_logger

    get_logger(__name__).warning("eval.slot.corrupt", slot=key,
                                 detail="unreadable run-slot row; the slot runs again")


def new_group_id() -> str:
    return "evalrun-" + "".join(secrets.choice(_ALPHABET) for _ in range(8))


#: the owners of this process (several group stores may run one group side by side)
_LIVE: set[str] = set()


def _me() -> str:
    owner = f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"
    _LIVE.add(owner)
    return owner


def _owner_alive(owner: str) -> bool:
    host, _, rest = owner.partition(":")
    pid_text, _, _token = rest.partition(":")
    if host != socket.gethostname():
        return True  # another machine's claim: assume it is alive (no way to know here)
    if not pid_text.isdigit() or int(pid_text) == os.getpid():
        return owner in _LIVE
    try:
        os.kill(int(pid_text), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@attrs.frozen
class Claim:
    """What claiming a slot found: ``mine`` (run it), ``done`` (reuse it) or ``busy``."""

    state: str
    document: Mapping[str, Any] | None = None


class GroupStore:
    """The group and slot documents of one document store."""

    def __init__(self, documents: Any) -> None:
        self.documents = documents
        self.owner = _me()

    def create(self, group: Group) -> None:
        # "counters": every finish of this group counts its run (agent_env.evals.stats)
        self.documents.insert(GROUPS, {**group.to_document(), "counters": True})

    def load(self, group_id: str) -> Group:
        doc = self.documents.find_one(GROUPS, {"_id": group_id})
        if doc is None:
            raise UserError(f"--resume {group_id}: no such run group (eval run prints the id "
                            "when it starts)")
        return Group.from_document(doc)

    def slot_documents(self, group: Group) -> dict[int, dict[str, Any]]:
        """The group's readable slot rows by index (a corrupt row is left out: its slot is
        run again, see :meth:`claim`)."""
        docs = self.documents.query(SLOTS, {"group": group.group_id})
        return {int(d["index"]): d for d in docs if readable_slot(d)}

    def _key(self, group: Group, slot: Slot) -> str:
        return f"{group.group_id}#{slot.index}"

    def claim(self, group: Group, slot: Slot) -> Claim:
        from agent_env.stores.base import DuplicateKeyError

        key = self._key(group, slot)
        fresh = {"_id": key, "group": group.group_id, "index": slot.index, "state": CLAIMED,
                 "owner": self.owner, "rev": 1, "instance_id": None, "outcome": None,
                 "attempts": []}
        for _ in range(20):
            doc = self.documents.find_one(SLOTS, {"_id": key})
            if doc is None:
                try:
                    self.documents.insert(SLOTS, fresh)
                    return Claim("mine")
                except DuplicateKeyError:
                    continue
            if not readable_slot(doc):  # nothing in it can be trusted: run the slot again
                log_corrupt_slot(key)
                self.documents.replace(SLOTS, {"_id": key}, fresh)
                return Claim("mine")
            if doc["state"] == DONE and doc.get("outcome") in COMPLETED:
                return Claim("done", doc)
            if doc["state"] == CLAIMED and _owner_alive(str(doc.get("owner"))):
                return Claim("mine") if doc.get("owner") == self.owner else Claim("busy", doc)
            changed = self.documents.update(
                SLOTS, {"_id": key, "rev": doc["rev"]},
                {"$set": {"state": CLAIMED, "owner": self.owner, "rev": doc["rev"] + 1}})
            if changed:
                return Claim("mine")
        return Claim("busy")

    def finish(self, group: Group, slot: Slot, instance_id: str, outcome: str,
               attempts: Sequence[str], summary: RunSummary | None = None) -> None:
        """Mark the slot done; ``summary`` (the run's numbers; default: read from its record)
        goes on it and into the group's counters (:mod:`agent_env.evals.stats`), after taking
        an earlier one back out."""
        from agent_env.evals.stats import RunSummary, count, run_summary

        if summary is None:  # read the run's numbers from its record
            from agent_env.tasks.records import StoredInstances

            record = StoredInstances(self.documents).get(instance_id)
            summary = run_summary(slot.task_id, slot.task_version, outcome, record)
        key = self._key(group, slot)
        before = self.documents.find_one(SLOTS, {"_id": key}) or {}
        done: dict[str, Any] = {"$set": {"state": DONE, "instance_id": instance_id,
                                         "outcome": outcome, "attempts": list(attempts)},
                                "$inc": {"rev": 1}}
        done["$set"]["summary"] = summary.to_json()
        if not self.documents.update(SLOTS, {"_id": key, "owner": self.owner}, done):
            return
        if isinstance(before.get("summary"), dict):
            count(self.documents, group.group_id, RunSummary.from_json(before["summary"]), -1)
        count(self.documents, group.group_id, summary)

    def release(self, group: Group, slot: Slot) -> None:
        """Give a slot back (it was interrupted): a resume runs it."""
        self.documents.update(SLOTS, {"_id": self._key(group, slot), "owner": self.owner,
                                      "state": CLAIMED},
                              {"$set": {"state": RELEASED}, "$inc": {"rev": 1}})
