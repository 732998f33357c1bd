"""The ledger of live deployments: what outlives the command that deployed it.

``agent-env env deploy`` brings an env up and exits; the env stays up until its TTL or until
``env teardown``. Something must remember where it is: this ledger, one document per
deployment in the document store (collection ``deployments``), keyed by instance id. It holds
no secret (a deployment's token is printed once, never stored).

A record says what was deployed (``kind``: ``env`` now, ``agent`` for ``a2a-agent deploy``;
the entity id and version), where (sandbox provider and sandbox id), its URLs by name, and when
it was created and expires. The sandbox carries :data:`DEPLOYMENT_LABEL`, so ``agent-env gc``
(which otherwise removes a sandbox whose creating process is gone) keeps a deployment's sandbox
while its record is live, and removes it, with its record, once it has expired.

The API a deploying command needs: :class:`Deployment`, :func:`deployments` (the ledger over
the config's document store: ``add``/``get``/``list``/``remove``/``expired``),
:func:`tear_down` (terminate the sandbox and drop the record; idempotent) and
:data:`DEPLOYMENT_LABEL` (put it in the sandbox's labels).
"""

from __future__ import annotations

import builtins
import datetime as dt
from typing import Any

import attrs

from agent_env.stores.records import Records

#: Put on a deployment's sandbox, valued with its instance id; see the module docstring.
DEPLOYMENT_LABEL = "agentenv.deployment"
COLLECTION = "deployments"
KINDS = ("env", "agent")


def utc_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC).replace(microsecond=0)


def _utc(value: dt.datetime | str) -> dt.datetime:
    if isinstance(value, str):
        value = dt.datetime.fromisoformat(value)
    return value.replace(tzinfo=dt.UTC) if value.tzinfo is None else value.astimezone(dt.UTC)


@attrs.frozen
class Deployment:
    """One live deployment (see the module docstring). ``urls`` by name, e.g. ``gateway``."""

    instance_id: str
    kind: str = attrs.field(validator=attrs.validators.in_(KINDS))
    entity_id: str
    entity_version: int
    provider: str
    sandbox_id: str
    urls: dict[str, str]
    created_at: dt.datetime = attrs.field(converter=_utc)
    expires_at: dt.datetime = attrs.field(converter=_utc)
    #: The env state type it was deployed with (a snapshot of it deploys with the same).
    env_state_type: str | None = None

    def expired(self, now: dt.datetime | None = None) -> bool:
        return self.expires_at <= (now or utc_now())

    def to_json(self) -> dict[str, Any]:
        return {"instance_id": self.instance_id, "kind": self.kind,
                "entity_id": self.entity_id, "entity_version": self.entity_version,
                "provider": self.provider, "sandbox_id": self.sandbox_id,
                "urls": dict(self.urls), "created_at": self.created_at.isoformat(),
                "expires_at": self.expires_at.isoformat(),
                "env_state_type": self.env_state_type}

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Deployment:
        fields = {f.name for f in attrs.fields(cls)}
        return cls(**{k: v for k, v in doc.items() if k in fields})


class Deployments(Records[Deployment]):
    """The ledger on a document store (one document per deployment, ``_id`` = instance id)."""

    collection = COLLECTION

    @staticmethod
    def key(record: Deployment) -> str:
        return record.instance_id

    @staticmethod
    def load(document: dict[str, Any]) -> Deployment:
        return Deployment.from_json(document)

    def list(self, kind: str | None = None) -> builtins.list[Deployment]:
        """Every recorded deployment (of ``kind``), oldest first, expired ones included."""
        return self.all({"kind": kind} if kind else None)

    def expired(self, now: dt.datetime | None = None) -> builtins.list[Deployment]:
        return [d for d in self.list() if d.expired(now)]

    def for_sandbox(self, provider: str, sandbox_id: str) -> Deployment | None:
        """The deployment living in that sandbox, if the ledger has one."""
        doc = self.documents.find_one(COLLECTION, {"provider": provider,
                                                   "sandbox_id": sandbox_id})
        return Deployment.from_json(doc) if doc else None


def deployments() -> Deployments:
    """The ledger over the config's document store."""
    from agent_env.runtime import current

    return Deployments(current().document_store)


async def tear_down(ledger: Deployments, deployment: Deployment) -> bool:
    """Terminate the deployment's sandbox and drop its record; False when the sandbox was
    already gone (the record is dropped all the same). A failed terminate keeps the record and
    raises, so nothing is forgotten while still up."""
    from agent_env.tasks.sandboxes import open_provider

    sandbox = await open_provider(deployment.provider).attach(deployment.sandbox_id)
    if sandbox is not None:
        await sandbox.terminate()
    ledger.remove(deployment.instance_id)
    return sandbox is not None
