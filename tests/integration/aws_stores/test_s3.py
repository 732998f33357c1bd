"""The S3 object store on moto: the object-store conformance suite, then S3's own faults."""

from __future__ import annotations

import functools
import urllib.request
from collections.abc import Callable
from typing import Any

import pytest
from aws_moto import Conflict, LostAnswer, Throttle

from agent_env.stores.base import ObjectExists, ObjectNotFound, StoreError
from agent_env.testing.store_conformance.object import ObjectStoreSuite
from agentenv_aws_stores.aws import ResourceMissing
from agentenv_aws_stores.s3 import S3ObjectStore

BUCKET = "agentenv-conformance"


@pytest.fixture(scope="session")
def bucket(boto: Callable[[str], Any]) -> str:
    boto("s3").create_bucket(Bucket=BUCKET)
    return BUCKET


class TestS3ObjectStore(ObjectStoreSuite):
    @pytest.fixture
    def store(self, aws: dict[str, Any], bucket: str) -> S3ObjectStore:
        return S3ObjectStore(bucket=bucket, prefix="suite", **aws)

    @pytest.fixture
    def store_factory(self, aws: dict[str, Any], bucket: str) -> Callable[[], S3ObjectStore]:
        return functools.partial(S3ObjectStore, bucket=bucket, prefix="suite", **aws)

    def test_signed_put_url_is_sigv4(self, store: S3ObjectStore, prefix: str) -> None:
        url = store.signed_put_url(prefix + "up.txt", expires_in=600)
        assert url.startswith("http://") and "X-Amz-Signature=" in url


def test_keys_live_under_the_prefix(aws: dict[str, Any], bucket: str, boto: Any) -> None:
    store = S3ObjectStore(bucket=bucket, prefix="/team-a/", **aws)
    store.put("runs/x.txt", b"x", content_type="text/plain")
    head = boto("s3").head_object(Bucket=bucket, Key="team-a/runs/x.txt")
    assert head["ContentType"] == "text/plain"
    assert store.list("runs/") == ["runs/x.txt"]
    assert S3ObjectStore(bucket=bucket, prefix="team-b", **aws).list() == []


def test_presigned_urls_are_sigv4(aws: dict[str, Any], bucket: str) -> None:
    store = S3ObjectStore(bucket=bucket, prefix="urls", **aws)
    store.put("a", b"x")
    assert "X-Amz-Signature=" in store.signed_get_url("a", expires_in=60)
    url = store.signed_put_url("typed", content_type="text/csv")
    request = urllib.request.Request(
        url, data=b"a,b\n", method="PUT", headers={"Content-Type": "text/csv"}
    )
    urllib.request.urlopen(request, timeout=10).close()
    assert store.metadata("typed").content_type == "text/csv"


def test_missing_bucket_is_one_line_naming_it(aws: dict[str, Any], unique_name: str) -> None:
    store = S3ObjectStore(bucket=unique_name, **aws)
    with pytest.raises(ResourceMissing) as caught:
        store.put("k", b"x")
    message = str(caught.value)
    assert "\n" not in message
    assert f"'{unique_name}'" in message
    assert f"aws s3 mb s3://{unique_name}" in message and "create_bucket = true" in message


def test_missing_bucket_is_created_when_configured(
    aws: dict[str, Any], unique_name: str, boto: Any
) -> None:
    store = S3ObjectStore(bucket=unique_name, create_bucket=True, **aws)
    store.put("k", b"x")
    assert boto("s3").get_object(Bucket=unique_name, Key="k")["Body"].read() == b"x"
    assert S3ObjectStore(bucket=unique_name, create_bucket=True, **aws).get("k") == b"x"


def test_a_retried_write_that_landed_is_not_a_conflict(aws: dict[str, Any], bucket: str) -> None:
    """The first PUT reaches S3 but its answer is lost; botocore retries; S3 says 412."""
    store = S3ObjectStore(bucket=bucket, prefix="lost", **aws)
    lost = LostAnswer()
    store.client.meta.events.register("before-send.s3.PutObject", lost)
    meta = store.put("once", b"payload")
    assert lost.sent == 1
    assert meta.size == 7 and store.get("once") == b"payload"
    with pytest.raises(ObjectExists):  # someone else's write is still refused
        store.put("once", b"other")


def test_throttling_is_retried_with_backoff(aws: dict[str, Any], bucket: str) -> None:
    store = S3ObjectStore(bucket=bucket, prefix="slow", **aws)
    throttle = Throttle(1, json_protocol=False)
    store.client.meta.events.register("before-send.s3.PutObject", throttle)
    store.put("k", b"x")
    assert throttle.refused == 1 and store.get("k") == b"x"


def test_a_conflicting_write_in_flight_is_retried(aws: dict[str, Any], bucket: str) -> None:
    store = S3ObjectStore(bucket=bucket, prefix="conflict", **aws)
    conflict = Conflict(2)
    store.client.meta.events.register("before-send.s3.PutObject", conflict)
    store.put("k", b"x")
    assert conflict.refused == 2 and store.get("k") == b"x"
    conflict.remaining = 10  # it never clears: the writer that holds the key decides
    with pytest.raises(ObjectExists):
        store.put("k", b"y")
    with pytest.raises(StoreError, match="kept conflicting"):
        store.put("other", b"y")


def test_multipart_streams_keep_write_once(aws: dict[str, Any], bucket: str) -> None:
    import io

    store = S3ObjectStore(bucket=bucket, prefix="multi", part_size=5 * 1024 * 1024, **aws)
    data = bytes(range(256)) * (5 * 4096 + 7)  # two parts
    meta = store.put("big", io.BytesIO(data))
    assert meta.size == len(data) and store.get("big") == data
    with pytest.raises(ObjectExists):
        store.put("big", io.BytesIO(data))
    store.put("big", io.BytesIO(data[:10]), allow_overwrite=True)
    assert store.get("big") == data[:10]
    with pytest.raises(ObjectNotFound):
        store.get("never")
