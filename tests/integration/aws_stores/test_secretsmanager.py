"""The Secrets Manager secret store on moto: the secret-store suite over a JSON and a YAML
bundle, then the TTL cache, serving the last good bundle, and values kept out of logs."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from agent_env.testing.store_conformance.secret import SEEDED_SECRETS, SecretStoreSuite
from agentenv_aws_stores.aws import ResourceMissing
from agentenv_aws_stores.secretsmanager import SecretsManagerSecretStore


@pytest.fixture(scope="session")
def seeded(boto: Callable[[str], Any]) -> dict[str, str]:
    client = boto("secretsmanager")
    client.create_secret(Name="agentenv/json-bundle", SecretString=json.dumps(SEEDED_SECRETS))
    lines = [f"{k}: {json.dumps(v, ensure_ascii=False)}\n" for k, v in SEEDED_SECRETS.items()]
    yaml_text = "".join(lines) + "db:\n  password: nested\n"
    client.create_secret(Name="agentenv/yaml-bundle", SecretString=yaml_text)
    return {"json": "agentenv/json-bundle", "yaml": "agentenv/yaml-bundle"}


def count_calls(store: SecretsManagerSecretStore, calls: list[str]) -> None:
    store.client.meta.events.register(
        "before-call.secrets-manager", lambda model, **_: calls.append(model.name)
    )


class TestJsonBundle(SecretStoreSuite):
    @pytest.fixture
    def store(self, aws: dict[str, Any], seeded: dict[str, str]) -> SecretsManagerSecretStore:
        return SecretsManagerSecretStore(secret_id=seeded["json"], **aws)


class TestYamlBundle(SecretStoreSuite):
    @pytest.fixture
    def store(self, aws: dict[str, Any], seeded: dict[str, str]) -> SecretsManagerSecretStore:
        return SecretsManagerSecretStore(secret_id=seeded["yaml"], **aws)


def test_nested_names_and_one_fetch_per_ttl(aws: dict[str, Any], seeded: dict[str, str]) -> None:
    store = SecretsManagerSecretStore(secret_id=seeded["yaml"], ttl=60, **aws)
    calls: list[str] = []
    store.get("warm")
    count_calls(store, calls)
    assert store.get("db.password") == "nested"
    assert store.get("db") is None  # a table is not a secret
    assert calls == []  # served from the cached bundle


def test_rotation_is_seen_after_the_ttl(
    aws: dict[str, Any], boto: Callable[[str], Any], unique_name: str
) -> None:
    client = boto("secretsmanager")
    client.create_secret(Name=unique_name, SecretString='{"token": "old"}')
    store = SecretsManagerSecretStore(secret_id=unique_name, ttl=300, **aws)
    now = [1000.0]
    store.clock = lambda: now[0]
    assert store.get("token") == "old"
    client.put_secret_value(SecretId=unique_name, SecretString='{"token": "rotated"}')
    now[0] += 299
    assert store.get("token") == "old"
    now[0] += 2
    assert store.get("token") == "rotated"


def test_a_failed_refresh_serves_the_last_good_bundle(
    aws: dict[str, Any],
    boto: Callable[[str], Any],
    unique_name: str,
    capfd: pytest.CaptureFixture[str],
) -> None:
    client = boto("secretsmanager")
    client.create_secret(Name=unique_name, SecretString='{"token": "s3cr3t-value"}')
    store = SecretsManagerSecretStore(secret_id=unique_name, ttl=10, retry_after=5, **aws)
    now = [1000.0]
    store.clock = lambda: now[0]
    assert store.get("token") == "s3cr3t-value"
    client.delete_secret(SecretId=unique_name, ForceDeleteWithoutRecovery=True)
    now[0] += 11
    assert store.get("token") == "s3cr3t-value"  # the refresh failed: last good bundle
    captured = capfd.readouterr()
    assert unique_name in captured.err and "last good" in captured.err
    assert "s3cr3t-value" not in captured.out + captured.err
    assert "s3cr3t-value" not in repr(store)
    calls: list[str] = []
    count_calls(store, calls)
    now[0] += 4
    store.get("token")
    assert calls == []  # no retry before retry_after
    now[0] += 2
    store.get("token")
    assert calls == ["GetSecretValue"]


def test_a_missing_secret_says_how_to_create_it(aws: dict[str, Any], unique_name: str) -> None:
    store = SecretsManagerSecretStore(secret_id=unique_name, **aws)
    with pytest.raises(ResourceMissing) as caught:
        store.get("token")
    message = str(caught.value)
    assert "\n" not in message and f"'{unique_name}'" in message
    assert "aws secretsmanager create-secret" in message


def test_a_broken_bundle_never_quotes_its_text(
    aws: dict[str, Any], boto: Callable[[str], Any], unique_name: str
) -> None:
    from agent_env.stores.base import StoreError

    boto("secretsmanager").create_secret(Name=unique_name, SecretString="k: [unclosed hunter2")
    with pytest.raises(StoreError) as caught:
        SecretsManagerSecretStore(secret_id=unique_name, **aws).get("k")
    assert "hunter2" not in str(caught.value) and unique_name in str(caught.value)
