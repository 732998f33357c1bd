"""Env snapshots: a deployed env's servers (and services) saved as images, to deploy from.

Why: an env seeded with data (a database loaded row by row through its API) takes as long to
seed again as the seeding took; ``agent-env env snapshot --instance-id ID`` saves each of the
deployment's private containers as an image (through the sandbox contract's
``commit_containers``), and a deploy that names the snapshot (``deploy_env``'s
``snapshot_id``, ``env deploy --from-snapshot ID``) starts each container from its saved image
instead (``start_from_committed``). A snapshot is only used whole: when a container's image has
changed since (the env was rebuilt), the deploy fails naming it rather than mixing old and new.

This module is the record of a snapshot: one document per snapshot in the document store,
collection ``env_snapshots``; the images live in the provider's engine.
"""

from __future__ import annotations

import datetime as dt
import secrets
import string
from typing import Any

import attrs

from agent_env.deployments import _utc
from agent_env.sandbox.base import CommittedImage
from agent_env.stores.records import Records

COLLECTION = "env_snapshots"
ID_PREFIX = "snap-"
SNAPSHOT_LABEL = "agentenv.snapshot"


def new_snapshot_id() -> str:
    alphabet = string.ascii_lowercase + string.digits
    return ID_PREFIX + "".join(secrets.choice(alphabet) for _ in range(12))


@attrs.frozen
class EnvSnapshot:
    """One snapshot: of which env, on which provider, the image of each container."""

    snapshot_id: str
    env_id: str
    env_version: int
    provider: str
    created_at: dt.datetime = attrs.field(converter=_utc)
    images: tuple[CommittedImage, ...] = ()
    #: The env state its deployment had (its store is one of the images).
    env_state_type: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"snapshot_id": self.snapshot_id,
                "env_id": self.env_id, "env_version": self.env_version,
                "provider": self.provider, "created_at": self.created_at.isoformat(),
                "images": [attrs.asdict(image) for image in self.images],
                "env_state_type": self.env_state_type}

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> EnvSnapshot:
        return cls(snapshot_id=doc["snapshot_id"], env_id=doc["env_id"],
                   env_version=int(doc["env_version"]), provider=doc["provider"],
                   created_at=doc["created_at"],
                   images=tuple(CommittedImage(**i) for i in doc.get("images") or []),
                   env_state_type=doc.get("env_state_type"))


class EnvSnapshots(Records[EnvSnapshot]):
    """The snapshots, over a document store."""

    collection = COLLECTION

    @staticmethod
    def key(record: EnvSnapshot) -> str:
        return record.snapshot_id

    @staticmethod
    def load(document: dict[str, Any]) -> EnvSnapshot:
        return EnvSnapshot.from_json(document)


def env_snapshots() -> EnvSnapshots:
    from agent_env.runtime import current

    return EnvSnapshots(current().document_store)
