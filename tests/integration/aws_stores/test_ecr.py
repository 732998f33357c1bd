"""The ECR image store on moto: repositories, refs on the registry host, push/pull credentials."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from agent_env.stores.base import RegistryAuth
from agentenv_aws_stores.ecr import EcrImageStore


@pytest.fixture
def store(aws: dict[str, Any]) -> EcrImageStore:
    return EcrImageStore(prefix="agentenv", **aws)


def test_ensure_repository_creates_it_once(
    store: EcrImageStore, boto: Callable[[str], Any], unique_name: str
) -> None:
    store.ensure_repository(unique_name)
    store.ensure_repository(unique_name)  # idempotent
    found = boto("ecr").describe_repositories(repositoryNames=[f"agentenv/{unique_name}"])
    repository = found["repositories"][0]
    assert repository["imageTagMutability"] == "MUTABLE"
    assert store.image_ref(unique_name, "v1") == f"{repository['repositoryUri']}:v1"


def test_image_refs_use_the_registry_host(store: EcrImageStore) -> None:
    ref = store.image_ref("hello-env", "sha-abc")
    host, _, rest = ref.partition("/")
    assert host.endswith(".dkr.ecr.us-east-1.amazonaws.com")
    assert rest == "agentenv/hello-env:sha-abc"
    assert store.owns(ref)
    assert not store.owns("python:3.11-slim")
    assert not store.owns(f"{host}/other-prefix/x:1")


def test_auth_mints_docker_login_credentials(store: EcrImageStore) -> None:
    ref = store.image_ref("hello-env", "v1")
    auth = store.auth(ref)
    assert isinstance(auth, RegistryAuth)
    assert auth.registry == ref.split("/")[0]
    assert auth.username == "AWS" and auth.password
    assert auth.password not in repr(auth)
    assert store.auth("docker.io/library/python:3.11") is None


def test_an_explicit_account_needs_no_call_for_refs(aws: dict[str, Any]) -> None:
    store = EcrImageStore(registry_id="210987654321", **aws)
    assert store.image_ref("x", "1") == "210987654321.dkr.ecr.us-east-1.amazonaws.com/x:1"
    auth = store.auth(store.image_ref("x", "1"))
    assert auth is not None and auth.registry.startswith("210987654321.")
    with pytest.raises(Exception, match="12-digit"):
        EcrImageStore(registry_id="nope", **aws)
