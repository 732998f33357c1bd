"""open_store: picking a backend from config, its settings, and the errors for missing ones."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agent_env.config import load_config
from agent_env.contributions import StoreBackend
from agent_env.errors import ConfigError, MissingPluginError
from agent_env.hookspecs import hookimpl
from agent_env.plugins import PluginHost
from agent_env.runtime import Runtime, current, use
from agent_env.stores import DocumentStore, ObjectStore, SecretStore, build_store
from agent_env.stores.filesystem import FilesystemObjectStore
from agent_env.stores.sqlite import SqliteDocumentStore


@pytest.fixture
def host() -> PluginHost:
    """Only the kernel's store plugin: no entry points, whatever is installed in the venv."""
    return PluginHost(builtin=("agent_env.stores.builtin",), discover=False)


def _config(**stores: Any) -> Any:
    return load_config(overrides={"stores": stores} if stores else {})


def test_defaults_are_local_and_live_under_the_state_root(
    host: PluginHost, isolated_state: Path
) -> None:
    config = _config()
    documents = Runtime(host=host).store("document", config)
    objects = Runtime(host=host).store("object", config)
    secrets = Runtime(host=host).store("secret", config)
    assert isinstance(documents, SqliteDocumentStore) and isinstance(documents, DocumentStore)
    assert isinstance(objects, FilesystemObjectStore) and isinstance(objects, ObjectStore)
    assert isinstance(secrets, SecretStore)
    assert documents.path == isolated_state / "documents.sqlite3"
    assert objects.root == (isolated_state / "objects").resolve()
    documents.insert("c", {"_id": "x"})
    assert (isolated_state / "documents.sqlite3").is_file()
    assert isolated_state.stat().st_mode & 0o077 == 0


def test_stores_are_cached_per_runtime(host: PluginHost) -> None:
    config = _config()
    runtime = Runtime(host=host)
    first = runtime.store("document", config)
    assert runtime.store("document", config) is first
    other = Runtime(host=host).store("document", config)
    assert other is not first and other.path == first.path
    runtime.close()
    assert runtime.store("document", config) is not first


def test_path_setting_overrides_the_default(host: PluginHost, tmp_path: Path) -> None:
    config = _config(
        document={"backend": "sqlite", "path": str(tmp_path / "elsewhere" / "d.db")},
        object={"backend": "filesystem", "path": str(tmp_path / "blobs"), "fsync": False},
    )
    assert Runtime(host=host).store("document", config).path == tmp_path / "elsewhere" / "d.db"
    objects = Runtime(host=host).store("object", config)
    assert objects.root == (tmp_path / "blobs").resolve() and objects.fsync is False
    relative = _config(document={"backend": "sqlite", "path": "sub/d.db"})
    assert Runtime(host=host).store("document", relative).path == relative.state_root / "sub/d.db"


def test_a_backend_from_an_absent_first_party_plugin_names_the_extra(host: PluginHost) -> None:
    with pytest.raises(MissingPluginError) as caught:
        Runtime(host=host).store("object", _config(object="s3"))
    assert str(caught.value) == (
        "the 's3' object store comes from the aws_stores plugin, which is not installed "
        "(pip install 'agentenv-framework[aws]')"
    )
    with pytest.raises(MissingPluginError, match=r"'firestore' document store .* gcp_stores"):
        Runtime(host=host).store("document", _config(document="firestore"))
    with pytest.raises(MissingPluginError, match="docker_env plugin"):
        Runtime(host=host).store("image", _config())


def test_an_unknown_backend_lists_the_installed_ones(host: PluginHost) -> None:
    with pytest.raises(MissingPluginError) as caught:
        Runtime(host=host).store("object", _config(object="nosuch"))
    assert str(caught.value) == "no object store named 'nosuch' (installed: filesystem)"
    with pytest.raises(MissingPluginError, match=r"no image store named 'x' \(installed: none\)"):
        Runtime(host=host).store("image", _config(image="x"))
    with pytest.raises(ValueError, match="unknown store kind"):
        Runtime(host=host).store("blob", _config())


def test_an_unknown_setting_is_a_config_error(host: PluginHost) -> None:
    with pytest.raises(ConfigError, match=r"unknown setting\(s\) pth .*known: fsync, path"):
        Runtime(host=host).store("object", _config(object={"backend": "filesystem", "pth": "x"}))


def test_secret_references_are_resolved_with_the_secret_store(
    host: PluginHost, tmp_path: Path
) -> None:
    config = _config(
        secret={"backend": "local", "values": {"blob_root": str(tmp_path / "secret-root")}},
        object={"backend": "filesystem", "path": "secret:blob_root"},
    )
    assert Runtime(host=host).store("object", config).root == (tmp_path / "secret-root").resolve()
    missing = _config(object={"backend": "filesystem", "path": "secret:nothing_here"})
    with pytest.raises(ConfigError, match="nothing_here"):
        Runtime(host=host).store("object", missing)


def test_the_secret_store_cannot_use_secret_references(host: PluginHost) -> None:
    config = _config(secret={"backend": "local", "file": "secret:where"})
    with pytest.raises(ConfigError, match="cannot use secret: references"):
        Runtime(host=host).store("secret", config)


class _MemorySecrets(SecretStore):
    def __init__(self, **values: str) -> None:
        self.values = values

    def get(self, name: str) -> str | None:
        return self.values.get(name)


class _FakePlugin:
    @hookimpl
    def agent_env_stores(self) -> list[StoreBackend]:
        return [StoreBackend("secret", "memory", _MemorySecrets)]


def test_a_plugin_backend_is_selected_by_name(host: PluginHost) -> None:
    host.load()
    host.pm.register(_FakePlugin(), name="fake")
    store = Runtime(host=host).store("secret", _config(secret={"backend": "memory", "a": "1"}))
    assert isinstance(store, _MemorySecrets) and store.get("a") == "1"
    built = build_store("secret", "memory", {"b": "2"}, runtime=Runtime(host=host))
    assert built is not store and built.get("b") == "2"


def test_the_kernel_registers_the_local_stores(
    host: PluginHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agent_env import plugins

    assert "agent_env.stores.builtin" in plugins.BUILTIN_PLUGINS
    with use(Runtime(host=host)):  # the current runtime, minus other teams' plugins
        registry = current().host.registry("store")
        assert {"document:sqlite", "object:filesystem", "secret:local"} <= set(registry)
        assert isinstance(current().store("document"), SqliteDocumentStore)  # config defaults
