"""The ``gcs`` object store against ``gcp-storage-emulator``, through a checking proxy.

The emulator does not enforce generation preconditions: an upload with ``ifGenerationMatch=0``
over an existing object succeeds there (``test_the_emulator_alone_ignores_preconditions`` shows
it). Write-once is therefore tested through ``gcp_fakes.gcs_proxy``, which enforces
``ifGenerationMatch`` the way Cloud Storage does (412 ``conditionNotMet``, atomically per object)
and also checks bearer tokens and V4 URL signatures; the store's own part, sending the
precondition on every write-once upload, is asserted on the proxy's request log.
"""

from __future__ import annotations

import io
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from conftest import BUCKET, PROJECT
from gcp_fakes.gcs_proxy import GcsProxy

from agent_env.stores.base import ObjectExists, ObjectNotFound, UnsupportedOperation
from agent_env.testing.store_conformance.object import ObjectStoreSuite
from agentenv_gcp_stores.faults import AccessDenied, MissingResource
from agentenv_gcp_stores.gcs import GcsObjectStore


def _store(url: str, key_file: Path, **settings: object) -> GcsObjectStore:
    options: dict[str, object] = {
        "bucket": BUCKET,
        "project": PROJECT,
        "endpoint": url,
        "credentials_file": str(key_file),
        "prefix": "stores",
    }
    options.update(settings)
    return GcsObjectStore(**options)  # type: ignore[arg-type]


class TestGcsObjectStore(ObjectStoreSuite):
    @pytest.fixture
    def store(self, gcs: tuple[str, GcsProxy], key_file: Path) -> Iterator[GcsObjectStore]:
        store = _store(gcs[0], key_file)
        yield store
        store.close()

    @pytest.fixture
    def store_factory(
        self, gcs: tuple[str, GcsProxy], key_file: Path
    ) -> Callable[[], GcsObjectStore]:
        return lambda: _store(gcs[0], key_file)
