"""The kernel's own store backends, registered through the same hook as any plugin's.

Each factory imports its backend module only when config selects it, and takes the config's
``state_root`` (passed by :func:`agent_env.stores.open_store`) so files land there by default.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agent_env.contributions import StoreBackend
from agent_env.hookspecs import hookimpl


def _under(state_root: Path | None, path: str | None, default: str) -> Path:
    """``path`` if absolute, else under the state root (the working folder varies by run)."""
    if path and Path(path).expanduser().is_absolute():
        return Path(path).expanduser()
    if state_root is None:
        from agent_env.runtime import current

        state_root = current().config.state_root
    return Path(state_root) / (path or default)


def sqlite_document_store(
    *,
    state_root: Path | None = None,
    path: str | None = None,
    busy_timeout: float = 30.0,
    synchronous: str = "NORMAL",
) -> Any:
    """``[stores.document]`` settings: ``path`` (default state_root/documents.sqlite3), ..."""
    from agent_env.stores.sqlite import SqliteDocumentStore

    return SqliteDocumentStore(
        _under(state_root, path, "documents.sqlite3"),
        busy_timeout=busy_timeout,
        synchronous=synchronous,
    )


def filesystem_object_store(
    *, state_root: Path | None = None, path: str | None = None, fsync: bool = True
) -> Any:
    """``[stores.object]`` settings: ``path`` (default state_root/objects), ``fsync``."""
    from agent_env.stores.filesystem import FilesystemObjectStore

    return FilesystemObjectStore(_under(state_root, path, "objects"), fsync=fsync)


def local_secret_store(
    *,
    values: dict[str, Any] | None = None,
    file: str | None = None,
    use_environment: bool = True,
) -> Any:
    """``[stores.secret]`` settings: ``values``, ``file``, ``use_environment``."""
    from agent_env.stores.secrets import LocalSecretStore

    return LocalSecretStore(values=values, file=file, use_environment=use_environment)


@hookimpl
def agent_env_stores() -> list[StoreBackend]:
    return [
        StoreBackend("document", "sqlite", sqlite_document_store),
        StoreBackend("object", "filesystem", filesystem_object_store),
        StoreBackend("secret", "local", local_secret_store),
    ]
