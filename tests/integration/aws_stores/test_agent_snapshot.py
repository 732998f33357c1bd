"""snapshot/v1 on SDK agents served on loopback: one agent saves a context's trajectory and
workspace through boto3 presigned URLs into moto's S3, another loads them and carries on from
there; refusals (unknown context, no workspace, a hostile tar, bad grants) write nothing."""

from __future__ import annotations

import datetime as dt
import hashlib
import io
import tarfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from scribe_agent import ScribeAgent, send

from agentenv_aws_stores.s3 import S3ObjectStore
from agentenv_protocol.agent import create_app
from agentenv_protocol.testing import RunningServer, serve_app

SOON = (dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)).isoformat()


@pytest.fixture
async def agents(tmp_path: Path) -> AsyncIterator[tuple[RunningServer, RunningServer, Path]]:
    async with serve_app(create_app(ScribeAgent(tmp_path / "a"))) as first, \
            serve_app(create_app(ScribeAgent(tmp_path / "b"))) as second:
        yield first, second, tmp_path


def put_grant(s3_store: S3ObjectStore, key: str) -> dict[str, Any]:
    return {"media_type": "application/octet-stream", "max_bytes": 1 << 20,
            "write": {"kind": "http_put", "url": s3_store.signed_put_url(key),
                      "expires_at": SOON}}


def get_grant(s3_store: S3ObjectStore, key: str, uploaded: dict[str, Any] | None = None
              ) -> dict[str, Any]:
    return {"media_type": "application/octet-stream", "max_bytes": 1 << 20,
            **(uploaded or {}),
            "read": {"kind": "http_get", "url": s3_store.signed_get_url(key), "expires_at": SOON}}


async def _call(http: aiohttp.ClientSession, verb: str, url: str,
                body: dict[str, Any]) -> tuple[int, Any]:
    async with http.request(verb, url + "/ext/snapshot", json=body) as resp:
        return resp.status, await resp.json()


async def test_save_then_load_carries_trajectory_and_workspace(
        agents: tuple[RunningServer, RunningServer, Path], s3_store: S3ObjectStore) -> None:
    first, second, tmp = agents
    async with aiohttp.ClientSession() as http:
        await send(http, first.url, "alpha", "ctx-1")
        await send(http, first.url, "beta", "ctx-1")
        status, saved = await _call(http, "POST", first.url, {
            "context_id": "ctx-1", "objects": {"trajectory": put_grant(s3_store, "snap/t.json"),
                                               "workspace": put_grant(s3_store, "snap/w.tar")}})
        assert status == 200 and saved["context_id"] == "ctx-1"
        for name, key in (("trajectory", "snap/t.json"), ("workspace", "snap/w.tar")):
            data = s3_store.get(key)
            assert saved["objects"][name] == {"size_bytes": len(data),
                                              "sha256": hashlib.sha256(data).hexdigest()}

        status, loaded = await _call(http, "PUT", second.url, {
            "objects": {"trajectory": get_grant(s3_store, "snap/t.json",
                                                saved["objects"]["trajectory"]),
                        "workspace": get_grant(s3_store, "snap/w.tar",
                                               saved["objects"]["workspace"])},
            "target_context_id": "resumed"})
        assert (status, loaded) == (200, {"context_id": "resumed"})
        assert sorted(p.name for p in (tmp / "b" / "notes").iterdir()) == [
            "alpha.txt", "beta.txt"]
        await send(http, second.url, "gamma", "resumed")  # carries on from the saved state
        async with http.post(second.url + "/ext/trajectory",
                             json={"context_id": "resumed"}) as resp:
            events = (await resp.json())["trajectory"]
    assert [e["text"] for e in events] == ["alpha", "beta", "gamma"]


async def test_refusals_write_and_load_nothing(
        agents: tuple[RunningServer, RunningServer, Path], s3_store: S3ObjectStore,
        tmp_path: Path) -> None:
    first, second, tmp = agents
    hostile = io.BytesIO()
    with tarfile.open(fileobj=hostile, mode="w") as tar:
        info = tarfile.TarInfo("../escaped.txt")
        info.size = 3
        tar.addfile(info, io.BytesIO(b"bad"))
    s3_store.put("h/w.tar", hostile.getvalue())
    s3_store.put("h/t.json", b'{"format": null, "events": []}')
    s3_store.put("h/junk.json", b"[1, 2]")
    expired = put_grant(s3_store, "x.json")
    expired["write"]["expires_at"] = "2020-01-01T00:00:00Z"

    cases: list[tuple[str, dict[str, Any], int, str]] = [
        ("POST", {"context_id": "nope", "objects": {"trajectory": put_grant(s3_store, "x.json")}},
         404, "not_found"),
        ("POST", {"context_id": "ctx", "objects": {}}, 400, "invalid_params"),
        ("POST", {"context_id": "ctx", "objects": {"trajectory": expired}}, 410,
         "grant_expired"),
        ("PUT", {"objects": {"trajectory": get_grant(s3_store, "h/t.json"),
                             "workspace": get_grant(s3_store, "h/w.tar")}}, 400, "invalid_params"),
        ("PUT", {"objects": {"trajectory": get_grant(s3_store, "h/junk.json")}}, 400,
         "invalid_params"),
        ("PUT", {"objects": {"trajectory": get_grant(s3_store, "h/t.json"),
                             "memory": get_grant(s3_store, "h/t.json")}}, 400, "invalid_params"),
    ]
    async with aiohttp.ClientSession() as http:
        await send(http, first.url, "one", "ctx")
        for verb, body, status, code in cases:
            got_status, got = await _call(http, verb, second.url if verb == "PUT" else first.url,
                                          body)
            assert (got_status, got["error"]["code"]) == (status, code), body
        assert not (tmp / "escaped.txt").exists() and not (tmp / "b").exists()
        assert not s3_store.exists("x.json")
        async with serve_app(create_app(ScribeAgent(None))) as bare:
            await send(http, bare.url, "one", "ctx")
            status, body = await _call(http, "POST", bare.url, {
                "context_id": "ctx", "objects": {"trajectory": put_grant(s3_store, "y.json"),
                                                 "workspace": put_grant(s3_store, "y.tar")}})
            assert (status, body["error"]["code"]) == (400, "invalid_params")
            assert "keeps no workspace" in body["error"]["message"]
        assert not s3_store.exists("y.json")


async def test_card_lists_snapshot_with_its_objects(
        agents: tuple[RunningServer, RunningServer, Path]) -> None:
    async with aiohttp.ClientSession() as http, \
            http.get(agents[0].url + "/.well-known/agent-card.json") as resp:
        card = await resp.json()
    entry = next(e for e in card["capabilities"]["extensions"]
                 if e["uri"] == "urn:agentenv:snapshot/v1")
    assert entry["params"]["objects"] == ["trajectory", "workspace"]
    assert {m: v["method"] for m, v in entry["params"]["methods"].items()} == {
        "save": "POST", "load": "PUT", "enable_changelog": "POST", "apply_changelog": "PUT",
        "changelog_status": "GET"}
