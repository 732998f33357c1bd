"""Conformance suite for :class:`agent_env.stores.base.SecretStore` backends.

Subclass :class:`SecretStoreSuite` and provide a ``store`` fixture whose backend already holds
every secret in :data:`SEEDED_SECRETS` (create them in the fixture: a Secrets Manager bundle,
a local ``values`` table, ...) and none named in :data:`ABSENT_SECRETS`.
"""

from __future__ import annotations

import threading

import pytest

from agent_env.stores.base import SecretStore

__all__ = ["ABSENT_SECRETS", "SEEDED_SECRETS", "SecretStoreSuite"]

SEEDED_SECRETS = {
    "agentenv_conformance_token": "tok-3f9a",
    "agentenv_conformance_unicode": "pässwörd ✓ with spaces",
    "agentenv_conformance_json_like": '{"not": "parsed"}',
}
ABSENT_SECRETS = ("agentenv_conformance_absent", "agentenv_conformance_token_2")


class SecretStoreSuite:
    """The behaviour every secret store must have."""

    def test_seeded_secrets_are_returned(self, store: SecretStore) -> None:
        for name, value in SEEDED_SECRETS.items():
            found = store.get(name)
            assert isinstance(found, str)
            assert found == value

    @pytest.mark.parametrize("name", ABSENT_SECRETS)
    def test_absent_secret_is_none(self, store: SecretStore, name: str) -> None:
        assert store.get(name) is None

    def test_repeated_and_concurrent_reads_agree(self, store: SecretStore) -> None:
        results: list[str | None] = []
        lock = threading.Lock()

        def read() -> None:
            for _ in range(20):
                value = store.get("agentenv_conformance_token")
                with lock:
                    results.append(value)

        threads = [threading.Thread(target=read) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        assert results == ["tok-3f9a"] * 80

    def test_secret_values_do_not_leak_into_repr(self, store: SecretStore) -> None:
        store.get("agentenv_conformance_token")
        assert "tok-3f9a" not in repr(store)
