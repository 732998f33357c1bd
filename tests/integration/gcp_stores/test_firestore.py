"""The ``firestore`` document store: the real client library against a fake Firestore over gRPC.

No Firestore emulator installs on these machines, so ``gcp_fakes.firestore`` serves the five
RPCs the store sends (BatchGetDocuments, RunQuery, BeginTransaction, Commit, Rollback), built
from the proto types the client library ships, with Firestore's value order, filter and
precondition semantics, and serializable transactions; the client connects to it through
``FIRESTORE_EMULATOR_HOST`` as it would to the official emulator. The document and versioned
conformance suites run unchanged against it.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator

import pytest
from conftest import PROJECT, FirestoreServer

from agent_env.testing.store_conformance.document import DocumentStoreSuite
from agent_env.testing.store_conformance.versioned import VersionedStoreSuite
from agentenv_gcp_stores.firestore import FirestoreDocumentStore


def _store(**settings: object) -> FirestoreDocumentStore:
    options: dict[str, object] = {"project": PROJECT, "prefix": "t_"}
    options.update(settings)
    return FirestoreDocumentStore(**options)  # type: ignore[arg-type]


class TestFirestoreDocumentStore(DocumentStoreSuite):
    @pytest.fixture
    def store(self, firestore_server: FirestoreServer) -> Iterator[FirestoreDocumentStore]:
        store = _store()
        yield store
        store.close()

    @pytest.fixture
    def store_factory(self, firestore_server: FirestoreServer) -> Callable[[], FirestoreDocumentStore]:
        return _store


class TestVersionedOnFirestore(VersionedStoreSuite):
    @pytest.fixture
    def documents(self, firestore_server: FirestoreServer) -> Iterator[FirestoreDocumentStore]:
        store = _store(prefix="v_")
        yield store
        store.close()

    @pytest.fixture
    def documents_factory(
        self, firestore_server: FirestoreServer
    ) -> Callable[[], FirestoreDocumentStore]:
        return lambda: _store(prefix="v_")
