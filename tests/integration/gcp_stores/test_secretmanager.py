"""The ``secretmanager`` secret store: the real client library (REST transport) against a fake.

``gcp_fakes.secretmanager`` serves ``versions:access``, the one call the store makes, with the
REST API's bodies and errors and a bearer-token check; the client signs its own token with the
test service-account key. So what runs here is the store's real request path end to end.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from gcp_fakes.testbed import PROJECT

from agent_env.stores.base import StoreError
from agent_env.testing.store_conformance.secret import SEEDED_SECRETS, SecretStoreSuite
from agentenv_gcp_stores.faults import AccessDenied, MissingResource
from agentenv_gcp_stores.secretmanager import SecretManagerSecretStore


def _secret(fake: Any, data: bytes | str) -> str:
    """A new secret holding ``data``; returns its id."""
    secret_id = f"agentenv-{uuid.uuid4().hex[:8]}"
    fake.add(f"projects/{PROJECT}/secrets/{secret_id}", data)
    return secret_id


def _store(served: tuple[str, Any], key_file: Path, secret: str, **settings: Any):
    return SecretManagerSecretStore(
        secret=secret,
        project=PROJECT,
        endpoint=served[0],
        credentials_file=str(key_file),
        **settings,
    )


class TestSecretManagerJsonBundle(SecretStoreSuite):
    @pytest.fixture
    def store(
        self, secret_manager_fake: tuple[str, Any], key_file: Path
    ) -> Iterator[SecretManagerSecretStore]:
        secret = _secret(secret_manager_fake[1], json.dumps(SEEDED_SECRETS))
        store = _store(secret_manager_fake, key_file, secret)
        yield store
        store.close()


class TestSecretManagerYamlBundle(SecretStoreSuite):
    @pytest.fixture
    def store(
        self, secret_manager_fake: tuple[str, Any], key_file: Path
    ) -> Iterator[SecretManagerSecretStore]:
        secret = _secret(secret_manager_fake[1], yaml.safe_dump(SEEDED_SECRETS))
        store = SecretManagerSecretStore(
            secret=f"projects/{PROJECT}/secrets/{secret}",
            endpoint=secret_manager_fake[0],
            credentials_file=str(key_file),
            format="yaml",
        )
        yield store
        store.close()


@pytest.fixture
def sm(secret_manager_fake: tuple[str, Any]) -> Iterator[tuple[str, Any]]:
    secret_manager_fake[1].faults.clear()
    yield secret_manager_fake
    secret_manager_fake[1].faults.clear()


def test_values_are_text_and_dotted_paths_reach_nested_ones(
    sm: tuple[str, Any], key_file: Path
) -> None:
    bundle = "openai:\n  key: sk-1\nport: 8080\ndebug: true\nempty: null\nlist: [1]\n"
    store = _store(sm, key_file, _secret(sm[1], bundle))
    assert store.get("openai.key") == "sk-1"
    assert (store.get("port"), store.get("debug")) == ("8080", "true")
    assert store.get("empty") is None and store.get("list") is None and store.get("openai") is None


def test_the_bundle_is_cached_for_ttl(sm: tuple[str, Any], key_file: Path) -> None:
    secret = _secret(sm[1], '{"k": "v1"}')
    store = _store(sm, key_file, secret, ttl=0.3)
    before = sm[1].accesses
    assert [store.get("k") for _ in range(20)] == ["v1"] * 20
    assert sm[1].accesses == before + 1
    sm[1].add(f"projects/{PROJECT}/secrets/{secret}", '{"k": "v2"}')
    assert store.get("k") == "v1"
    time.sleep(0.35)
    assert store.get("k") == "v2"
    assert sm[1].accesses == before + 2


def test_a_failed_refresh_serves_the_last_good_bundle(sm: tuple[str, Any], key_file: Path) -> None:
    from structlog.testing import capture_logs

    store = _store(sm, key_file, _secret(sm[1], '{"token": "tok-secret-value"}'), ttl=0, retries=2)
    assert store.get("token") == "tok-secret-value"
    sm[1].inject(503, 503)
    with capture_logs() as logs:
        assert store.get("token") == "tok-secret-value"
    assert [entry["event"] for entry in logs] == [
        "secret bundle refresh failed; serving the last good bundle"
    ]
    assert "ServiceUnavailable" in logs[0]["error"]
    assert "tok-secret-value" not in repr(logs)


def test_transient_errors_on_first_load_are_retried(sm: tuple[str, Any], key_file: Path) -> None:
    store = _store(sm, key_file, _secret(sm[1], '{"k": "v"}'))
    sm[1].inject(503, 429, 500)
    assert store.get("k") == "v"


def test_missing_secret_is_one_line_naming_it_and_how_to_create_it(
    sm: tuple[str, Any], key_file: Path
) -> None:
    store = _store(sm, key_file, "agentenv-absent")
    with pytest.raises(MissingResource) as caught:
        store.get("k")
    message = str(caught.value)
    assert f"projects/{PROJECT}/secrets/agentenv-absent" in message and "\n" not in message
    assert f"gcloud secrets create agentenv-absent --project {PROJECT}" in message


def test_permission_denied_names_the_secret_and_the_action(
    sm: tuple[str, Any], key_file: Path
) -> None:
    secret = _secret(sm[1], '{"k": "v"}')
    sm[1].forbidden.add(f"projects/{PROJECT}/secrets/{secret}")
    with pytest.raises(AccessDenied) as caught:
        _store(sm, key_file, secret).get("k")
    message = str(caught.value)
    assert message.startswith(f"permission denied: cannot read projects/{PROJECT}/secrets/{secret}")
    assert "secretmanager.versions.access" in message


def test_refused_credentials(sm: tuple[str, Any]) -> None:
    store = SecretManagerSecretStore(
        secret="s", project=PROJECT, endpoint=sm[0], anonymous=True, retries=1
    )
    with pytest.raises(AccessDenied, match="the credentials were refused: cannot read"):
        store.get("k")


def test_bad_bundles_are_reported_without_their_content(
    sm: tuple[str, Any], key_file: Path
) -> None:
    for data, problem in (
        ('["sk-leak-1"]', "must hold a mapping"),
        ('{"a": "sk-leak-2",', "not valid JSON"),
        ("a: [sk-leak-3", "not valid YAML"),
    ):
        with pytest.raises(StoreError) as caught:
            _store(sm, key_file, _secret(sm[1], data)).get("a")
        assert problem in str(caught.value) and "sk-leak" not in str(caught.value)


def test_a_corrupted_payload_is_refused(sm: tuple[str, Any], key_file: Path) -> None:
    store = _store(sm, key_file, _secret(sm[1], '{"k": "v"}'))
    sm[1].corrupt_next = True
    with pytest.raises(StoreError, match="crc32c"):
        store.get("k")
    assert store.get("k") == "v"


def test_settings_are_checked() -> None:
    from agent_env.errors import UserError

    for bad in ({"secret": ""}, {"secret": "a/b"}, {"secret": "s", "format": "toml"}):
        with pytest.raises(UserError):
            SecretManagerSecretStore(**bad)  # type: ignore[arg-type]
