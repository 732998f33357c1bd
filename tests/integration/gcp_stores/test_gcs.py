"""The ``gcs`` object store against ``gcp-storage-emulator``, through a checking proxy.

The emulator does not enforce generation preconditions: an upload with ``ifGenerationMatch=0``
over an existing object succeeds there (``test_the_emulator_alone_ignores_preconditions`` shows
it). Write-once is therefore tested through ``gcp_fakes.gcs_proxy``, which enforces
``ifGenerationMatch`` the way Cloud Storage does (412 ``conditionNotMet``, atomically per object)
and also checks bearer tokens and V4 URL signatures; the store's own part, sending the
precondition on every write-once upload, is asserted on the proxy's request log.
"""

from __future__ import annotations

import functools
import io
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from gcp_fakes.gcs_proxy import GcsProxy
from gcp_fakes.testbed import BUCKET, PROJECT

from agent_env.stores.base import ObjectExists, ObjectNotFound, UnsupportedOperation
from agent_env.testing.store_conformance.object import ObjectStoreSuite
from agentenv_gcp_stores.faults import AccessDenied, MissingResource
from agentenv_gcp_stores.gcs import GcsObjectStore


def _store(url: str, key_file: Path, **settings: object) -> GcsObjectStore:
    return GcsObjectStore(**_options(url, key_file, **settings))  # type: ignore[arg-type]


def _options(url: str, key_file: Path, **settings: object) -> dict[str, object]:
    options: dict[str, object] = {
        "bucket": BUCKET,
        "project": PROJECT,
        "endpoint": url,
        "credentials_file": str(key_file),
        "prefix": "stores",
    }
    options.update(settings)
    return options


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
        return functools.partial(GcsObjectStore, **_options(gcs[0], key_file))  # type: ignore[arg-type]


@pytest.fixture
def proxy(gcs: tuple[str, GcsProxy]) -> Iterator[GcsProxy]:
    gcs[1].faults.clear()
    yield gcs[1]
    gcs[1].faults.clear()


@pytest.fixture
def prefix() -> str:
    return f"extra/{uuid.uuid4().hex[:10]}/"


def test_the_emulator_alone_ignores_preconditions(gcs_emulator: str, prefix: str) -> None:
    """Why the proxy exists: straight at the emulator, a second write-once put succeeds."""
    store = GcsObjectStore(bucket=BUCKET, endpoint=gcs_emulator, anonymous=True)
    store.put(prefix + "k", b"first")
    store.put(prefix + "k", b"second")  # Cloud Storage would answer 412 here
    assert store.get(prefix + "k") == b"second"


def test_write_once_sends_the_generation_precondition(
    gcs: tuple[str, GcsProxy], key_file: Path, prefix: str
) -> None:
    url, proxy = gcs
    store = _store(url, key_file)
    store.put(prefix + "once", b"x")
    store.put(prefix + "over", b"x", allow_overwrite=True)
    uploads = [query for method, path, query in proxy.log if path.startswith("/upload/")]
    assert uploads[-2]["ifGenerationMatch"] == ["0"]
    assert "ifGenerationMatch" not in uploads[-1]
    with pytest.raises(ObjectExists):
        store.put(prefix + "once", b"y")
    assert store.get(prefix + "once") == b"x"


def test_large_objects_go_resumable_and_stay_write_once(
    gcs: tuple[str, GcsProxy], key_file: Path, prefix: str
) -> None:
    url, proxy = gcs
    store = _store(url, key_file)
    data = bytes(range(256)) * (9 * 4096 + 1)  # just over 9 MiB: past the multipart limit
    meta = store.put(prefix + "big", io.BytesIO(data))
    assert meta.size == len(data) and store.get(prefix + "big") == data
    assert any(q.get("uploadType") == ["resumable"] for _, _, q in proxy.log)
    with pytest.raises(ObjectExists):
        store.put(prefix + "big", data)
    with store.open(prefix + "big") as stream:
        assert stream.read(3) == data[:3]


def test_transient_errors_are_retried(
    proxy: GcsProxy, gcs: tuple[str, GcsProxy], key_file: Path, prefix: str
) -> None:
    store = _store(gcs[0], key_file)
    proxy.inject("POST", r"^/upload/", 503, times=2)
    proxy.inject("GET", r"/o/", 429)
    store.put(prefix + "r", b"retried")
    assert store.get(prefix + "r") == b"retried"
    assert not any(f.times for f in proxy.faults)


def test_a_lost_answer_to_a_write_once_put_is_not_a_false_conflict(
    proxy: GcsProxy, gcs: tuple[str, GcsProxy], key_file: Path, prefix: str
) -> None:
    """The upload lands but its answer is lost (503 after the write): the retry gets 412, and
    the store recognises its own write by the write id instead of reporting ObjectExists."""
    store = _store(gcs[0], key_file)
    proxy.inject("POST", r"^/upload/", 503, after=True)
    meta = store.put(prefix + "lost", b"mine")
    assert meta.size == 4 and store.get(prefix + "lost") == b"mine"
    with pytest.raises(ObjectExists):  # while a real second writer still loses
        store.put(prefix + "lost", b"theirs")


def test_persistent_failure_gives_up_with_the_cause(
    proxy: GcsProxy, gcs: tuple[str, GcsProxy], key_file: Path, prefix: str
) -> None:
    store = _store(gcs[0], key_file, retries=2)
    proxy.inject("GET", r"/o/", 503, times=2)
    with pytest.raises(Exception, match=r"gave up after 2 attempts: ServiceUnavailable"):
        store.get(prefix + "x")


def test_missing_bucket_is_one_line_naming_it(gcs: tuple[str, GcsProxy], key_file: Path) -> None:
    store = _store(gcs[0], key_file, bucket="no-such-bucket")
    for call in (lambda: store.put("k", b"x"), lambda: store.list(), lambda: store.get("k")):
        with pytest.raises(MissingResource) as caught:
            call()
        message = str(caught.value)
        assert "'no-such-bucket' does not exist" in message and "\n" not in message
        assert (
            "gcloud storage buckets create gs://no-such-bucket --project agentenv-test" in message
        )


def test_refused_credentials_name_the_resource_and_action(
    gcs: tuple[str, GcsProxy], prefix: str
) -> None:
    store = GcsObjectStore(bucket=BUCKET, endpoint=gcs[0], anonymous=True)
    with pytest.raises(AccessDenied) as caught:
        store.put(prefix + "k", b"x")
    message = str(caught.value)
    assert message.startswith("the credentials were refused: cannot write")
    assert f"gs://{BUCKET}/" in message and "storage.objects.create" in message


def test_signing_needs_a_private_key(gcs_emulator: str, prefix: str) -> None:
    store = GcsObjectStore(bucket=BUCKET, endpoint=gcs_emulator, anonymous=True)
    store.put(prefix + "s", b"x")
    with pytest.raises(UnsupportedOperation, match="credentials_file to a service-account key"):
        store.signed_get_url(prefix + "s")
    with pytest.raises(ObjectNotFound):
        store.signed_get_url(prefix + "absent")


def test_signed_urls_are_checked_by_signature_and_content_type(
    gcs: tuple[str, GcsProxy], key_file: Path, prefix: str
) -> None:
    store = _store(gcs[0], key_file)
    store.put(prefix + "doc.txt", b"signed")
    url = store.signed_get_url(prefix + "doc.txt", expires_in=60)
    assert "X-Goog-Algorithm=GOOG4-RSA-SHA256" in url and "X-Goog-Expires=60" in url
    tampered = url.replace("doc.txt", "doc.txu")
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(tampered, timeout=10)
    assert caught.value.code == 403
    put_url = store.signed_put_url(prefix + "typed.csv", content_type="text/csv")
    request = urllib.request.Request(
        put_url, data=b"a,b", method="PUT", headers={"Content-Type": "text/csv"}
    )
    with urllib.request.urlopen(request, timeout=10):
        pass
    assert store.metadata(prefix + "typed.csv").content_type == "text/csv"
    with pytest.raises(ValueError, match="expires_in"):
        store.signed_get_url(prefix + "doc.txt", expires_in=8 * 24 * 3600)


def test_prefix_keeps_keys_apart(gcs: tuple[str, GcsProxy], key_file: Path, prefix: str) -> None:
    one, two = _store(gcs[0], key_file, prefix="one/"), _store(gcs[0], key_file, prefix="two")
    one.put(prefix + "k", b"1")
    two.put(prefix + "k", b"2")
    assert (one.get(prefix + "k"), two.get(prefix + "k")) == (b"1", b"2")
    assert one.list(prefix) == [prefix + "k"]
    assert "gs://agentenv-test-bucket/one/" in repr(one)
