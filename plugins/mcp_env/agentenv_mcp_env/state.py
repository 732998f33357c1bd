"""The ``local_postgres`` env state: a PostgreSQL the env's servers keep their data in.

``deploy_env`` with ``env_state_type = "local_postgres"`` starts a ``servicedb`` container
beside the env's servers (PostgreSQL from Debian's packages, built from :data:`CONTEXT`), on
the env's private network, with one schema per env server (its environment name). Each server
gets ``DATABASE_URL``, scoped to its own schema by ``search_path`` (the others' tables are there
under their schema's name, so two servers can share rows), and starts once the store is ready.
User, password and database are ``agentenv``, as the reference's.

Without an instance the store is the run's own: its data goes with the sandbox. With a durable
instance (``env init-env-state``) the data directory is the durable volume
``agentenv-state-<instance id>``, which outlives every run until ``env teardown-env-state``
removes it, so the envs of several runs read and write the same rows.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agent_env.api import ContainerSpec, Healthcheck, StepError, VolumeMount

LOCAL_POSTGRES = "local_postgres"
#: Its host name on the env's network.
SERVICE = "servicedb"
PORT = 5432
USER = PASSWORD = DATABASE = "agentenv"
DATA = "/var/lib/postgresql"
CONTEXT = Path(__file__).parent / "servicedb"
#: Read-only MCP tools over the store (:data:`DB_MCP_CONTEXT`), started beside it and served by
#: the gateway at ``/env/db-mcp/mcp`` only: a developer's view, not the agent's tools.
DB_MCP = "db-mcp"
DB_MCP_CONTEXT = Path(__file__).parent / "dbmcp"
DB_MCP_PORT = 18765
READY = Healthcheck(("CMD-SHELL", "test -f /tmp/agentenv-ready && pg_isready -h 127.0.0.1 -q"),
                    interval=0.5, timeout=5, retries=240)
_SCHEMA = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_-]{0,62}")


def volume_name(instance_id: str) -> str:
    """The durable volume of an instance (on the engine of its provider)."""
    return f"agentenv-state-{instance_id}"


def database_url(schema: str) -> str:
    """What a server connects with: its own schema first on the search path."""
    return (f"postgresql://{USER}:{PASSWORD}@{SERVICE}:{PORT}/{DATABASE}"
            f"?options=-c%20search_path%3D%22{schema}%22,public")


def schemas(names: Sequence[str]) -> list[str]:
    """The servers' environment names as schema names; StepError for one that cannot be."""
    bad = [n for n in names if not _SCHEMA.fullmatch(n)]
    if bad:
        raise StepError(f"env state: {', '.join(map(repr, bad))} cannot name a schema (letters, "
                        "digits, '_' and '-'): rename the env server")
    return list(dict.fromkeys(names))


def db_mcp_spec(labels: dict[str, str]) -> ContainerSpec:
    """db-mcp's container (its image filled in once built): every schema is in its reach."""
    return ContainerSpec(name=DB_MCP, image="", labels=labels, env={
        "MCP_HOST": "0.0.0.0", "MCP_PORT": str(DB_MCP_PORT),
        "DATABASE_URL": f"postgresql://{USER}:{PASSWORD}@{SERVICE}:{PORT}/{DATABASE}"})


def servicedb_spec(names: Sequence[str], labels: dict[str, str],
                   instance: Any | None) -> ContainerSpec:
    """The store's container (its image filled in once built)."""
    durable = () if instance is None else (
        VolumeMount(volume_name(instance.instance_id), DATA, durable=True),)
    return ContainerSpec(name=SERVICE, image="", env={"AGENTENV_SCHEMAS": ",".join(names)},
                         labels=labels, healthcheck=READY, volumes=durable)
