"""Object transfer grants (``agentenv_protocol.transfer``) against S3 presigned URLs made by the
real boto3 SDK on moto's server: a write then a read by grant, and each refusal the contract
names (expired, too large, integrity, rejected, redirect, unreachable, malformed), with nothing
partly written."""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import socket
from collections.abc import Callable
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from agentenv_protocol.transfer import (
    HttpGrant,
    ReadObject,
    TransferError,
    WriteObject,
    read_object,
    read_object_from_wire,
    write_object,
    write_object_from_wire,
)

SOON = dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)


@pytest.fixture
def bucket(boto: Callable[[str], Any], unique_name: str) -> tuple[Any, str]:
    s3 = boto("s3")
    s3.create_bucket(Bucket=unique_name)
    return s3, unique_name


def presigned(s3: Any, bucket: str, key: str, method: str) -> str:
    return str(s3.generate_presigned_url(method, Params={"Bucket": bucket, "Key": key},
                                         ExpiresIn=3600))


def keys(s3: Any, bucket: str) -> list[str]:
    return [o["Key"] for o in s3.list_objects_v2(Bucket=bucket).get("Contents", [])]


async def test_write_then_read_by_grant_with_size_and_digest(bucket: tuple[Any, str]) -> None:
    s3, name = bucket
    data = b'[{"type": "answer", "text": "hi"}]' * 100
    put = write_object_from_wire({"media_type": "application/json", "max_bytes": 1 << 20,
                                  "write": {"kind": "http_put", "expires_at": SOON.isoformat(),
                                            "url": presigned(s3, name, "t.json", "put_object")}})
    uploaded = await write_object(put, data)
    assert uploaded.size_bytes == len(data)
    assert uploaded.sha256 == hashlib.sha256(data).hexdigest()
    assert s3.get_object(Bucket=name, Key="t.json")["Body"].read() == data

    get = read_object_from_wire({
        "media_type": "application/json", "max_bytes": 1 << 20,
        "size_bytes": uploaded.size_bytes, "sha256": uploaded.sha256,
        "read": {"kind": "http_get", "expires_at": SOON.isoformat(),
                 "url": presigned(s3, name, "t.json", "get_object")}})
    assert await read_object(get) == data


async def test_each_refusal_has_its_code_and_writes_nothing(bucket: tuple[Any, str]) -> None:
    s3, name = bucket
    put_url = presigned(s3, name, "big.bin", "put_object")

    async def code_of(awaitable: Any) -> tuple[str, int, bool]:
        with pytest.raises(TransferError) as caught:
            await awaitable
        return caught.value.code, caught.value.status, caught.value.retryable

    past = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=1)
    expired = WriteObject("application/octet-stream", 10, HttpGrant("http_put", put_url, past))
    assert await code_of(write_object(expired, b"x")) == ("grant_expired", 410, False)
    small = WriteObject("application/octet-stream", 4, HttpGrant("http_put", put_url, SOON))
    assert await code_of(write_object(small, b"12345")) == ("transfer_too_large", 413, False)
    assert keys(s3, name) == []  # neither was sent

    s3.put_object(Bucket=name, Key="obj", Body=b"0123456789")
    get_url = presigned(s3, name, "obj", "get_object")
    grant = HttpGrant("http_get", get_url, SOON)
    assert await code_of(read_object(ReadObject("x", 9, grant))) == (
        "transfer_too_large", 413, False)
    assert await code_of(read_object(ReadObject("x", 100, grant, sha256="0" * 64))) == (
        "integrity_mismatch", 422, False)
    assert await code_of(read_object(ReadObject("x", 100, grant, size_bytes=3))) == (
        "integrity_mismatch", 422, False)
    missing = HttpGrant("http_get", presigned(s3, name, "nothing-here", "get_object"), SOON)
    assert await code_of(read_object(ReadObject("x", 100, missing))) == (
        "transfer_rejected", 502, False)
    wrong_kind = HttpGrant("http_put", get_url, SOON)
    assert (await code_of(read_object(ReadObject("x", 100, wrong_kind))))[0] == "invalid_transfer"
    foreign = HttpGrant("http_get", "http://example.com/object", SOON)
    assert await code_of(read_object(ReadObject("x", 100, foreign))) == (
        "invalid_transfer", 400, False)


async def test_redirects_are_not_followed_and_an_unreachable_store_is_retryable() -> None:
    async def redirect(request: web.Request) -> web.Response:
        raise web.HTTPFound("http://127.0.0.1:9/elsewhere")

    async def slow(request: web.Request) -> web.Response:
        await asyncio.sleep(5)
        return web.Response(body=b"late")

    app = web.Application()
    app.router.add_get("/obj", redirect)
    app.router.add_get("/slow", slow)
    async with TestServer(app, host="127.0.0.1") as server:
        grant = HttpGrant("http_get", str(server.make_url("/obj")), SOON)
        with pytest.raises(TransferError) as caught:
            await read_object(ReadObject("x", 100, grant))
        assert caught.value.code == "transfer_rejected" and "redirect" in str(caught.value)
        late = HttpGrant("http_get", str(server.make_url("/slow")), SOON)
        with pytest.raises(TransferError) as caught:
            await read_object(ReadObject("x", 100, late), timeout=0.3)
        assert (caught.value.code, caught.value.status, caught.value.retryable) == (
            "transfer_timeout", 504, True)

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    closed = HttpGrant("http_get", f"http://127.0.0.1:{port}/obj", SOON)
    with pytest.raises(TransferError) as caught:
        await read_object(ReadObject("x", 100, closed))
    assert (caught.value.code, caught.value.status, caught.value.retryable) == (
        "transfer_unavailable", 502, True)


@pytest.mark.parametrize("wire", [
    None, {}, {"media_type": "x", "max_bytes": -1, "read": {}},
    {"media_type": "x", "max_bytes": 10, "read": {"kind": "http_get", "url": 5}},
    {"media_type": "x", "max_bytes": 10, "sha256": "abc",
     "read": {"kind": "http_get", "url": "https://s/x", "expires_at": SOON.isoformat()}},
    {"media_type": "x", "max_bytes": 10,
     "read": {"kind": "http_get", "url": "https://s/x", "expires_at": "tomorrow"}},
])
def test_malformed_grants_are_invalid_transfers(wire: Any) -> None:
    with pytest.raises(TransferError) as caught:
        read_object_from_wire(wire)
    assert (caught.value.code, caught.value.status) == ("invalid_transfer", 400)


async def test_a_body_that_arrives_in_pieces_is_read_whole_and_still_capped() -> None:
    """A store that sends an object in pieces, pausing between them (a slow link, a big
    snapshot): the read waits for every piece, and stops one byte past max_bytes."""
    piece = b"x" * 100_000

    async def trickle(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        response.content_length = len(piece) * 4
        await response.prepare(request)
        for _ in range(4):
            await response.write(piece)
            await asyncio.sleep(0.05)
        return response

    app = web.Application()
    app.router.add_get("/obj", trickle)
    async with TestServer(app, host="127.0.0.1") as server:
        grant = HttpGrant("http_get", str(server.make_url("/obj")), SOON)
        data = await read_object(ReadObject("x", 1 << 20, grant, size_bytes=len(piece) * 4))
        assert data == piece * 4
        with pytest.raises(TransferError) as caught:
            await read_object(ReadObject("x", 250_000, grant))
        assert caught.value.code == "transfer_too_large"
