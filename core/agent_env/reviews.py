"""Reviews: a person's go or no-go on a running task (the ``review`` step).

Why records in the document store: the run waits in one process, and the decision comes from
another (``agent-env task review``), maybe on another machine sharing the stores. A review is
``awaiting`` from the moment the step starts; a decision sets it ``approved`` or ``rejected``
once (a second decision is refused), and the step, which polls, goes on or fails
accordingly. A review nobody decided ends ``expired`` (its timeout) or ``cancelled`` (its run
stopped), so nothing is left awaiting a run that no longer waits.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import attrs

from agent_env.stores.records import Records

COLLECTION = "reviews"
AWAITING, APPROVED, REJECTED = "awaiting", "approved", "rejected"
#: Ends of a review nobody decided: its run stopped (Ctrl-C), or its timeout passed.
CANCELLED, EXPIRED = "cancelled", "expired"
DECISIONS = (APPROVED, REJECTED)


@attrs.frozen
class Review:
    """One review step of one run."""

    instance_id: str
    step_id: str
    state: str
    created_at: str
    label: str | None = None
    #: What the person reviews: the latest agent reply before the step, trimmed.
    upstream: str | None = None
    decided_at: str | None = None
    decided_by: str | None = None
    comment: str | None = None

    def to_json(self) -> dict[str, Any]:
        return attrs.asdict(self)


def review_key(instance_id: str, step_id: str) -> str:
    return f"{instance_id}:{step_id}"


class Reviews(Records[Review]):
    collection = COLLECTION

    @staticmethod
    def key(record: Review) -> str:
        return review_key(record.instance_id, record.step_id)

    @staticmethod
    def load(document: dict[str, Any]) -> Review:
        fields = {f.name for f in attrs.fields(Review)}
        return Review(**{k: v for k, v in document.items() if k in fields})

    def open(self, instance_id: str, step_id: str, label: str | None,
             upstream: str | None) -> Review:
        """The step's review, awaiting (a retried step starts a new one)."""
        self.remove(review_key(instance_id, step_id))
        review = Review(instance_id, step_id, AWAITING, _now(), label, upstream)
        self.add(review)
        return review

    def decide(self, instance_id: str, step_id: str, state: str, by: str,
               comment: str | None) -> Review:
        """Record a decision; ValueError when there is no such review or it is decided."""
        found = self.get(review_key(instance_id, step_id))
        if found is None:
            raise ValueError(f"no review '{step_id}' of run {instance_id} (agent-env task "
                             "review --list shows those awaiting)")
        if found.state != AWAITING:
            raise ValueError(f"review '{step_id}' of run {instance_id} was already "
                             f"{found.state} by {found.decided_by}")
        decided = attrs.evolve(found, state=state, decided_at=_now(), decided_by=by,
                               comment=comment)
        self.remove(review_key(instance_id, step_id))
        self.add(decided)
        return decided

    def awaiting(self) -> list[Review]:
        return self.all({"state": AWAITING})


def reviews(documents: Any = None) -> Reviews:
    """The reviews in ``documents`` (default: the configured document store)."""
    if documents is None:
        from agent_env.runtime import current

        documents = current().document_store
    return Reviews(documents)


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
