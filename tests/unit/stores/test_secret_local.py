"""The local secret store: the conformance suite for each of its three sources, and their order."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_env.errors import ConfigError
from agent_env.stores.secrets import LocalSecretStore
from agent_env.testing.store_conformance.secret import SEEDED_SECRETS, SecretStoreSuite


class TestSecretsFromValues(SecretStoreSuite):
    @pytest.fixture
    def store(self) -> LocalSecretStore:
        return LocalSecretStore(values=SEEDED_SECRETS, use_environment=False)


class TestSecretsFromEnvironment(SecretStoreSuite):
    @pytest.fixture
    def store(self) -> LocalSecretStore:
        return LocalSecretStore(environ={k.upper(): v for k, v in SEEDED_SECRETS.items()})


class TestSecretsFromYamlFile(SecretStoreSuite):
    @pytest.fixture
    def store(self, tmp_path: Path) -> LocalSecretStore:
        path = tmp_path / "secrets.yaml"
        path.write_text(
            "".join(
                f"{k}: {json.dumps(v, ensure_ascii=False)}\n" for k, v in SEEDED_SECRETS.items()
            ),
            encoding="utf-8",
        )
        return LocalSecretStore(file=path, use_environment=False)


class TestSecretsFromJsonFile(SecretStoreSuite):
    @pytest.fixture
    def store(self, tmp_path: Path) -> LocalSecretStore:
        path = tmp_path / "secrets.json"
        path.write_text(json.dumps(SEEDED_SECRETS), encoding="utf-8")
        return LocalSecretStore(file=path, use_environment=False)


def test_environment_then_values_then_file(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text("a: file\nb: file\nc: file\ndb:\n  password: nested\nport: 5432\n")
    store = LocalSecretStore(values={"a": "values", "b": "values"}, file=path, environ={"A": "env"})
    assert [store.get(n) for n in "abc"] == ["env", "values", "file"]
    assert store.get("db.password") == "nested"
    assert store.get("port") == "5432"
    assert store.get("db") is None  # a table is not a secret


def test_the_file_is_reread_when_it_changes(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text("token: old\n")
    store = LocalSecretStore(file=path, use_environment=False)
    assert store.get("token") == "old"
    path.write_text("token: rotated\n")
    assert store.get("token") == "rotated"


def test_a_missing_or_broken_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        LocalSecretStore(file=tmp_path / "nope.yaml")
    path = tmp_path / "bad.yaml"
    path.write_text("ok: 1\nsecret: [unclosed hunter2\n")
    store = LocalSecretStore(file=path, use_environment=False)
    with pytest.raises(ConfigError) as caught:
        store.get("ok")
    assert "hunter2" not in str(caught.value)
    path.write_text("- a list\n")
    with pytest.raises(ConfigError, match="mapping"):
        store.get("ok")
