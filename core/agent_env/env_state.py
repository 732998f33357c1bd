"""Env state: a database an env's services keep their data in, for one run or across runs.

``deploy_env``'s ``env_state_type`` (``local_postgres``) asks the env type to deploy a state
store beside the env's servers for this run; ``env_state_instance_id`` attaches the deploy to a
*durable* instance instead, made by ``agent-env env init-env-state`` and kept, with its data,
until ``env teardown-env-state``, so envs of several runs read and write the same rows. Past
its expiry a deploy may no longer attach it; its data stays until the teardown. Which state
types an env type backs is its :attr:`EnvType.env_state_types`; how a store is run is the env
type's business.

This module is the kernel's part: the record of a durable instance (one document per instance
in the document store, collection ``env_state_instances``; it holds no secret), its id format
and lifetimes as the reference has them, and :class:`EnvStateChoice`, what ``deploy_env`` hands
the env type.
"""

from __future__ import annotations

import datetime as dt
import secrets
import string
from typing import Any

import attrs

from agent_env.deployments import _utc, utc_now
from agent_env.stores.records import Records

COLLECTION = "env_state_instances"
ID_PREFIX = "esi-"
#: How long deploys may attach a durable instance: at least as long as a run may (the default
#: run TTL), 30 days unless asked, at most a year (the reference's bounds).
MIN_TTL_SECONDS = 3 * 3600
DEFAULT_TTL_SECONDS = 30 * 24 * 3600
MAX_TTL_SECONDS = 365 * 24 * 3600


def new_instance_id() -> str:
    """``esi-`` and 12 lowercase letters and digits."""
    alphabet = string.ascii_lowercase + string.digits
    return ID_PREFIX + "".join(secrets.choice(alphabet) for _ in range(12))


@attrs.frozen
class EnvStateInstance:
    """A durable env state: which type, for which env, on which sandbox provider, until when."""

    instance_id: str
    state_type: str
    env_id: str
    #: The sandbox provider whose engine keeps its data (deploys that attach must use it).
    provider: str
    created_at: dt.datetime = attrs.field(converter=_utc)
    expires_at: dt.datetime = attrs.field(converter=_utc)
    #: What the env type recorded (the store's schemas...).
    metadata: dict[str, Any] = attrs.field(factory=dict)

    def expired(self, now: dt.datetime | None = None) -> bool:
        return (now or utc_now()) >= self.expires_at

    def to_json(self) -> dict[str, Any]:
        return {"instance_id": self.instance_id,
                "state_type": self.state_type, "env_id": self.env_id,
                "provider": self.provider, "created_at": self.created_at.isoformat(),
                "expires_at": self.expires_at.isoformat(), "metadata": dict(self.metadata)}

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> EnvStateInstance:
        return cls(instance_id=doc["instance_id"], state_type=doc["state_type"],
                   env_id=doc["env_id"], provider=doc["provider"],
                   created_at=doc["created_at"], expires_at=doc["expires_at"],
                   metadata=dict(doc.get("metadata") or {}))


@attrs.frozen
class EnvStateChoice:
    """What a deploy asked for: a state type, and the durable instance when it attaches one
    (None: a store of this run's own, gone with the run)."""

    state_type: str
    instance: EnvStateInstance | None = None
    #: A stored store env (``--service-db-env-id``) whose build context the store runs,
    #: instead of the env type's own (None: its own).
    store_env: str | None = None


class EnvStates(Records[EnvStateInstance]):
    """The durable instances, over a document store."""

    collection = COLLECTION

    @staticmethod
    def key(record: EnvStateInstance) -> str:
        return record.instance_id

    @staticmethod
    def load(document: dict[str, Any]) -> EnvStateInstance:
        return EnvStateInstance.from_json(document)


def env_states() -> EnvStates:
    """The durable instances of the config's document store."""
    from agent_env.runtime import current

    return EnvStates(current().document_store)
