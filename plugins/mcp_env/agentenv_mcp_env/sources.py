"""An env entity's files, read back from the stores and laid out as a Docker build context.

The ledger stores an env like an artifact (``envs`` kind: a file table whose contents live in
the object store under content-addressed keys). A deploy materialises that table into a scratch
folder that the sandbox provider builds; the image tag comes from the content, so the scratch
folder's own path never matters.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import attrs

from agent_env.api import StepError


@attrs.frozen
class EnvSource:
    """A stored env at one version: its settings and file table (path -> meta)."""

    id: str
    version: int
    name: str
    type: str
    environment_name: str | None
    image: str | None
    files: dict[str, dict[str, Any]] = attrs.field(factory=dict, repr=False)


def _stores(artifacts: Any) -> tuple[Any, Any]:
    """The versioned and object stores: the run's own (``StoredArtifacts``), else the config's."""
    versioned = getattr(artifacts, "versioned", None)
    objects = getattr(artifacts, "objects", None)
    if versioned is None or objects is None:
        from agent_env.api import object_store, versioned_store

        versioned, objects = versioned_store(), object_store()
    return versioned, objects


def load_env_source(artifacts: Any, env_id: str, version: int | None = None) -> EnvSource:
    """The stored env ``env_id`` (latest, or ``version``); StepError when it is not stored."""
    versioned, _ = _stores(artifacts)
    record = versioned.get("envs", env_id, version)
    if record is None:
        at = f" v{version}" if version else ""
        raise StepError(f"no env '{env_id}'{at} is stored")
    body = record.body
    return EnvSource(
        env_id, record.version, str(body.get("name") or env_id.rsplit("/", 1)[-1]),
        str(body.get("type") or "mcp_server"), body.get("environment_name"), body.get("image"),
        dict(body.get("files") or {}),
    )


def write_build_context(artifacts: Any, source: EnvSource, folder: Path) -> None:
    """Write ``source``'s files under ``folder`` with their modes (what the build hashes)."""
    from agent_env.api import write_stored_files

    _, objects = _stores(artifacts)
    try:
        write_stored_files(objects, source.files, folder, f"env {source.id}")
    except ValueError as exc:
        raise StepError(str(exc)) from None


def scratch_folder(prefix: str) -> AbstractContextManager[Path]:
    """A build context's temporary folder, claimed in the state root so that ``agent-env gc``
    removes it after a ``kill -9`` mid-build."""
    from agent_env.api import owned_scratch

    return owned_scratch(prefix)
