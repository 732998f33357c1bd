"""The image stores: the local engine and a loopback registry really pushed to and pulled from."""

from __future__ import annotations

import io
import tarfile
import uuid
from pathlib import Path
from typing import Any

import pytest

from agent_env.stores.base import ImageStore
from agentenv_docker_env.stores import LocalImageStore, LocalRegistryImageStore

pytestmark = pytest.mark.docker


def _tiny_image(client: Any, repo: str) -> str:
    """A one-file image made without any base (fast to push)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        data = uuid.uuid4().hex.encode()
        info = tarfile.TarInfo("hello.txt")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    client.api.import_image_from_data(buffer.getvalue(), repository=repo, tag="v1")
    return f"{repo}:v1"


def test_local_store(docker_client: Any, image_names: list[str]) -> None:
    store = LocalImageStore()
    assert isinstance(store, ImageStore)
    source = _tiny_image(docker_client, f"agentenv-test/src-{uuid.uuid4().hex[:6]}")
    image_names.append(source)
    ref = store.push(source, "agentenv-test/copy", "v2")
    image_names.append(ref)
    assert ref == "agentenv-test/copy:v2" and store.owns(ref)
    assert store.pull(ref) == docker_client.images.get(source).id
    assert not store.owns("127.0.0.1:5000/x:y") and store.auth(ref) is None


def test_local_registry_push_and_pull(
    docker_client: Any, tmp_path: Path, image_names: list[str]
) -> None:
    store = LocalRegistryImageStore(root=tmp_path / "registry")
    try:
        store.ensure_repository("envs/echo")
        source = _tiny_image(docker_client, f"agentenv-test/reg-{uuid.uuid4().hex[:6]}")
        image_names.append(source)
        image_id = docker_client.images.get(source).id
        ref = store.push(source, "envs/echo", "abc")
        assert ref.startswith("127.0.0.1:") and ref.endswith("/envs/echo:abc") and store.owns(ref)
        assert store.auth(ref) is None
        docker_client.images.remove(ref)
        assert store.pull(ref) == image_id
        image_names.append(ref)

        # A second store object on the same root reuses the running registry.
        again = LocalRegistryImageStore(root=tmp_path / "registry")
        assert again.registry == store.registry
    finally:
        store.stop()
    assert not (tmp_path / "registry" / "registry.json").exists()
