"""WriteNamespaceGrant: an env's ``data/get`` writes objects under a prefix through a boto3
presigned POST policy on moto's S3, and every limit and refusal of the grant answers its code
before anything is sent (nothing partly written)."""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Callable
from typing import Any

import pytest

from agentenv_protocol import AgentEnvEnvironment, environment_card, get_data
from agentenv_protocol.client import DataPlaneClient
from agentenv_protocol.errors import ProtocolError
from agentenv_protocol.parts import FileContent, FilePart, TextPart
from agentenv_protocol.testing import serve_env
from agentenv_protocol.transfer import NamespaceWriter, TransferError, write_namespace_from_wire

BLOB = bytes(range(256)) * 400  # 100 KiB


@environment_card(name="exporter")
class ExporterEnv(AgentEnvEnvironment):
    """Its state is a blob too big to send inline: given a namespace, data/get writes it
    there and answers a file part naming it."""

    @get_data
    async def get(self, write_namespace: dict[str, Any] | None = None) -> list[Any]:
        if write_namespace is None:
            return [TextPart("no namespace: state left out")]
        writer = NamespaceWriter(write_namespace)
        written = await writer.write("state/blob.bin", BLOB)
        uri = f"{writer.grant.url.rstrip('/')}/{written.key}"
        return [FilePart(FileContent(uri=uri, name=written.path),
                         metadata={"sha256": written.sha256, "size_bytes": written.size_bytes})]


@pytest.fixture
def bucket(boto: Callable[[str], Any], unique_name: str) -> tuple[Any, str]:
    s3 = boto("s3")
    s3.create_bucket(Bucket=unique_name)
    return s3, unique_name


def grant(s3: Any, bucket: str, root: str = "runs/r1/data", *, max_objects: int = 4,
          max_object_bytes: int = 1 << 20, max_total_bytes: int = 2 << 20,
          expires_in: int = 3600, url: str | None = None) -> dict[str, Any]:
    post = s3.generate_presigned_post(
        bucket, f"{root}/${{filename}}", Conditions=[["starts-with", "$key", f"{root}/"]],
        ExpiresIn=3600)
    expires = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=expires_in)
    return {"root_path": root, "expires_at": expires.isoformat(), "max_objects": max_objects,
            "max_object_bytes": max_object_bytes, "max_total_bytes": max_total_bytes,
            "write": {"kind": "http-post-policy", "url": url or post["url"],
                      "fields": post["fields"], "path_field": "key", "file_field": "file"}}


def keys(s3: Any, bucket: str) -> list[str]:
    return sorted(o["Key"] for o in s3.list_objects_v2(Bucket=bucket).get("Contents", []))


async def test_data_get_writes_into_the_namespace(bucket: tuple[Any, str]) -> None:
    s3, name = bucket
    async with serve_env(ExporterEnv()) as server, DataPlaneClient(server.url) as data:
        assert [p.text for p in await data.get()] == ["no namespace: state left out"]
        (part,) = await data.get(write_namespace=grant(s3, name))
    assert isinstance(part, FilePart) and part.file.name == "state/blob.bin"
    assert part.file.uri is not None and part.file.uri.endswith("/runs/r1/data/state/blob.bin")
    assert part.metadata == {"sha256": hashlib.sha256(BLOB).hexdigest(),
                             "size_bytes": len(BLOB)}
    assert s3.get_object(Bucket=name, Key="runs/r1/data/state/blob.bin")["Body"].read() == BLOB


async def test_limits_and_refusals_have_their_codes_and_write_nothing(
        bucket: tuple[Any, str]) -> None:
    s3, name = bucket

    async def code(writer: NamespaceWriter, path: str, data: bytes = b"x") -> str:
        with pytest.raises(TransferError) as caught:
            await writer.write(path, data)
        return caught.value.code

    writer = NamespaceWriter(grant(s3, name, max_objects=2, max_object_bytes=10,
                                   max_total_bytes=15))
    for path in ("../escape", "/abs", "a//b", "a/./b", ""):
        assert await code(writer, path) == "invalid_transfer", path
    assert await code(writer, "big", b"x" * 11) == "transfer_too_large"
    assert keys(s3, name) == []
    await writer.write("one", b"x" * 8)
    assert await code(writer, "one") == "invalid_transfer"  # a path written once
    assert await code(writer, "two", b"x" * 8) == "transfer_too_large"  # past the total
    await writer.write("two", b"x" * 7)
    assert await code(writer, "three") == "transfer_too_large"  # past max_objects
    assert keys(s3, name) == ["runs/r1/data/one", "runs/r1/data/two"]

    expired = NamespaceWriter(grant(s3, name, expires_in=-1))
    assert await code(expired, "late") == "grant_expired"
    foreign = NamespaceWriter(grant(s3, name, url="http://example.com/upload"))
    assert await code(foreign, "away") == "invalid_transfer"
    for bad in ({}, {"root_path": "r", "write": {"kind": "http_put", "url": "u"}},
                {**grant(s3, name), "max_objects": -1}):
        with pytest.raises(TransferError) as caught:
            write_namespace_from_wire(bad)
        assert caught.value.code == "invalid_transfer"
    assert keys(s3, name) == ["runs/r1/data/one", "runs/r1/data/two"]


async def test_a_refused_write_fails_data_get_by_its_code(bucket: tuple[Any, str]) -> None:
    s3, name = bucket
    async with serve_env(ExporterEnv()) as server, DataPlaneClient(server.url) as data:
        with pytest.raises(ProtocolError) as caught:
            await data.get(write_namespace=grant(s3, name, max_object_bytes=100))
    assert caught.value.code == -32000 and "max_object_bytes" in caught.value.message
    assert caught.value.data == {"code": "get_failed"}
    assert keys(s3, name) == []
