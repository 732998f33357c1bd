"""snapshot/v1's changelog on SDK agents served on loopback: one agent writes an increment per
marked tool call into moto's S3 through a signed POST policy (the S3 store's), another replays
them up to any point, files and conversation; refusals write nothing."""

from __future__ import annotations

import io
import tarfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from scribe_agent import ScribeAgent, send
from test_agent_snapshot import get_grant

from agent_env.api import StepError
from agent_env.stores.filesystem import FilesystemObjectStore
from agentenv_agents.snapshots import changelog_problem, increments_under, namespace_grant
from agentenv_aws_stores.s3 import S3ObjectStore
from agentenv_protocol.agent import create_app
from agentenv_protocol.testing import RunningServer, serve_app

PATH = "/ext/snapshot/changelog"


@pytest.fixture
async def agents(tmp_path: Path) -> AsyncIterator[tuple[RunningServer, RunningServer, Path]]:
    async with serve_app(create_app(ScribeAgent(tmp_path / "a"))) as first, \
            serve_app(create_app(ScribeAgent(tmp_path / "b"))) as second:
        yield first, second, tmp_path


async def call(http: aiohttp.ClientSession, verb: str, url: str,
               body: dict[str, Any] | None = None) -> tuple[int, Any]:
    async with http.request(verb, url + PATH, json=body) as resp:
        return resp.status, await resp.json()


def increment_grants(store: S3ObjectStore, prefix: str, before: int | None = None
                     ) -> list[dict[str, Any]]:
    return [{"sequence": seq, "object": get_grant(store, key)}
            for seq, key in increments_under(store, prefix, before)]


def notes(folder: Path) -> list[str]:
    return sorted(p.name for p in (folder / "notes").iterdir())


async def history(http: aiohttp.ClientSession, url: str, context_id: str) -> list[Any]:
    async with http.post(f"{url}/ext/trajectory", json={"context_id": context_id}) as resp:
        return (await resp.json())["trajectory"]


async def test_each_tool_call_is_an_increment_and_a_replay_stops_where_asked(
        agents: tuple[RunningServer, RunningServer, Path], s3_store: S3ObjectStore) -> None:
    first, second, tmp = agents
    async with aiohttp.ClientSession() as http:
        assert await call(http, "GET", first.url) == (200, {
            "enabled": False, "roots": [], "sequence": 0, "error": None})
        status, answer = await call(http, "POST", first.url, {
            "write_namespace": namespace_grant(s3_store, "cl/a/")})
        assert (status, answer) == (200, {"roots": ["."]})
        await send(http, first.url, "alpha beta -alpha", "ctx")  # three marked tool calls
        await send(http, first.url, "gamma", "ctx")  # no marks: the turn's end is one
        keys = [key for _, key in increments_under(s3_store, "cl/a/", None)]
        assert keys == [f"cl/a/00000{n}.tar" for n in (1, 2, 3, 4)]
        with tarfile.open(fileobj=io.BytesIO(s3_store.get("cl/a/000003.tar"))) as tar:
            assert tar.getnames() == ["changelog.json"]  # the third call only removed a file

        # replay up to (not including) the third call: alpha and beta exist, the prompt and
        # the first two calls are the conversation
        status, answer = await call(http, "PUT", second.url, {
            "increments": increment_grants(s3_store, "cl/a/", before=3),
            "resume_conversation": True, "target_context_id": "replayed"})
        assert (status, answer) == (200, {"count": 2, "context_id": "replayed"})
        assert notes(tmp / "b") == ["alpha.txt", "beta.txt"]
        assert [e.get("word") for e in await history(http, second.url, "replayed")] == [
            None, "alpha", "beta"]

        # the rest: alpha removed, gamma written; without resume no context is made
        status, answer = await call(http, "PUT", second.url, {
            "increments": [g for g in increment_grants(s3_store, "cl/a/")
                           if g["sequence"] >= 3]})
        assert (status, answer) == (200, {"count": 2})
        assert notes(tmp / "b") == notes(tmp / "a") == ["beta.txt", "gamma.txt"]
        assert await call(http, "GET", first.url) == (200, {
            "enabled": True, "roots": ["."], "sequence": 4, "error": None})


def hostile_increment(name: str) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        for member, data in (("changelog.json", b'{"sequence": 1, "events": [], '
                                                b'"deleted": []}'), (name, b"x")):
            info = tarfile.TarInfo(member)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


async def test_refusals_write_nothing(
        agents: tuple[RunningServer, RunningServer, Path], s3_store: S3ObjectStore) -> None:
    first, second, tmp = agents
    async with aiohttp.ClientSession() as http:
        grant = namespace_grant(s3_store, "cl/r/")
        assert (await call(http, "POST", first.url, {"write_namespace": grant}))[0] == 200
        status, answer = await call(http, "POST", first.url, {"write_namespace": grant})
        assert status == 409 and "already enabled" in answer["error"]["message"]
        status, answer = await call(http, "POST", second.url, {
            "write_namespace": grant, "roots": ["../etc"]})
        assert status == 400 and "inside the workspace" in answer["error"]["message"]
        status, answer = await call(http, "POST", second.url, {"write_namespace": {"x": 1}})
        assert status == 400 and answer["error"]["code"] == "invalid_transfer"
        expired = {**grant, "expires_at": "2020-01-01T00:00:00+00:00"}
        status, answer = await call(http, "POST", second.url, {"write_namespace": expired})
        assert status == 410 and answer["error"]["code"] == "grant_expired"
        foreign = {**grant, "write": {**grant["write"], "url": "http://example.com/upload"}}
        status, answer = await call(http, "POST", second.url, {"write_namespace": foreign})
        assert status == 400 and "must be https" in answer["error"]["message"]
        assert await call(http, "GET", second.url) == (200, {
            "enabled": False, "roots": [], "sequence": 0, "error": None})

        # an increment climbing out of the workspace: refused whole, nothing written
        s3_store.put("bad/000001.tar", hostile_increment("files/../escaped.txt"))
        s3_store.put("bad/000002.tar", hostile_increment("files/fine.txt"))
        status, answer = await call(http, "PUT", second.url, {
            "increments": increment_grants(s3_store, "bad/")})
        assert status == 400 and "escaped.txt" in answer["error"]["message"]
        assert not (tmp / "escaped.txt").exists() and not (tmp / "b").exists()
        status, answer = await call(http, "PUT", second.url, {"increments": [
            {"sequence": 2, "object": get_grant(s3_store, "bad/000002.tar")}]})
        assert status == 400 and "names another sequence" in answer["error"]["message"]
        assert not (tmp / "b").exists()
        status, answer = await call(http, "PUT", second.url, {"increments": [
            {"sequence": 1, "object": get_grant(s3_store, "bad/000002.tar")}] * 2})
        assert status == 400 and "given twice" in answer["error"]["message"]

        # a link the agent left in its workspace does not carry a write outside it
        outside = tmp / "outside"
        outside.mkdir()
        (tmp / "b").mkdir()
        (tmp / "b" / "notes").symlink_to(outside)
        s3_store.put("linked/000001.tar", hostile_increment("files/notes/x.txt"))
        status, answer = await call(http, "PUT", second.url, {
            "increments": increment_grants(s3_store, "linked/")})
        assert status == 400 and "goes through a link" in answer["error"]["message"]
        assert list(outside.iterdir()) == []


async def test_a_full_namespace_stops_the_log_but_not_the_turn(
        agents: tuple[RunningServer, RunningServer, Path], s3_store: S3ObjectStore) -> None:
    first, _, _ = agents
    async with aiohttp.ClientSession() as http:
        grant = namespace_grant(s3_store, "cl/full/", max_objects=1)
        assert (await call(http, "POST", first.url, {"write_namespace": grant}))[0] == 200
        await send(http, first.url, "one two three", "ctx")  # completes all the same
        status, answer = await call(http, "GET", first.url)
        assert status == 200 and answer["sequence"] == 1
        assert "increment 2 was not written" in answer["error"]
        # what the a2a agent type asks after each prompt, failing the prompt step with it
        stopped = await changelog_problem(http, first.url)
        assert stopped is not None and "changelog stopped: increment 2" in stopped
        assert [key for _, key in increments_under(s3_store, "cl/full/", None)] == [
            "cl/full/000001.tar"]


def test_a_store_that_cannot_sign_policies_is_named(tmp_path: Path) -> None:
    with pytest.raises(StepError, match=r"cannot sign one \(use S3\)"):
        namespace_grant(FilesystemObjectStore(tmp_path), "cl/")
