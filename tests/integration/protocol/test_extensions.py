"""Extensions (protocol.md section 6): routes, coercion, card advertisement, error bodies."""

from __future__ import annotations

import datetime as dt
import decimal
import enum
import uuid
from collections.abc import AsyncIterator
from typing import Any, Literal

import aiohttp
import pytest

from agentenv_protocol import AgentEnvEnvironment, AgentEnvError, environment_card, extension
from agentenv_protocol.testing import RunningServer, serve_env


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


@environment_card(name="ext")
class ExtEnv(AgentEnvEnvironment):
    @extension("urn:agentenv:types/v1", op="echo", method="GET")
    def echo_get(self, flag: bool, n: int, x: float, d: decimal.Decimal, day: dt.date,
                 at: dt.datetime, t: dt.time, u: uuid.UUID, c: Color,
                 mode: Literal["a", "b"], opt: int | None = None) -> dict[str, Any]:
        return {"flag": flag, "n": n, "x": x, "d": str(d), "day": day.isoformat(),
                "at": at.isoformat(), "t": t.isoformat(), "u": str(u), "c": c.value,
                "mode": mode, "opt": opt, "types": [type(v).__name__ for v in
                                                     (flag, n, x, d, day, at, t, u, c)]}

    @extension("urn:agentenv:types/v1", op="echo")
    def echo_post(self, n: int, flag: bool = False) -> dict[str, Any]:
        return {"n": n, "flag": flag}

    @extension("urn:agentenv:misc/v1")
    def nothing(self) -> None:
        return None

    @extension("urn:agentenv:misc/v1")
    def refuse(self) -> None:
        raise AgentEnvError("quota_exceeded", "too many", retryable=True, status=429)

    @extension("urn:agentenv:misc/v1")
    def refuse_default(self) -> None:
        raise AgentEnvError("nope", "no way")

    @extension("urn:agentenv:misc/v1")
    def crash(self) -> None:
        raise RuntimeError("boom")

    @extension("urn:agentenv:misc/v1", path="/custom/route", method="PUT")
    async def custom(self, value: str) -> dict[str, str]:
        return {"value": value}


@pytest.fixture
async def ext_server() -> AsyncIterator[RunningServer]:
    async with serve_env(ExtEnv()) as srv:
        yield srv


async def _call(method: str, url: str, **kw: Any) -> tuple[int, Any]:
    async with aiohttp.ClientSession() as http, http.request(method, url, **kw) as r:
        return r.status, await r.json(content_type=None)


def _invalid(message_part: str) -> Any:
    class Matcher:
        def __eq__(self, other: Any) -> bool:
            return (other["ok"] is False and other["error"]["code"] == "invalid_params"
                    and other["error"]["retryable"] is False
                    and other["error"]["applied"] == "no"
                    and message_part in other["error"]["message"])
    return Matcher()


async def test_get_query_coercion(ext_server: RunningServer) -> None:
    u = uuid.uuid4()
    status, body = await _call("GET", ext_server.url + "/agentenv/ext/types/echo", params={
        "flag": "true", "n": "42", "x": "1.5", "d": "3.10", "day": "2025-01-02",
        "at": "2025-01-02T03:04:05Z", "t": "10:11:12", "u": str(u), "c": "blue", "mode": "b"})
    assert status == 200
    assert body["types"] == ["bool", "int", "float", "Decimal", "date", "datetime", "time",
                             "UUID", "Color"]
    assert body["n"] == 42 and body["flag"] is True and body["d"] == "3.10"
    assert body["at"] == "2025-01-02T03:04:05+00:00" and body["c"] == "blue"
    assert body["opt"] is None


async def test_post_body_coercion_and_empty_body(ext_server: RunningServer) -> None:
    assert await _call("POST", ext_server.url + "/agentenv/ext/types/echo",
                       json={"n": "7", "flag": 1}) == (200, {"n": 7, "flag": True})
    assert await _call("POST", ext_server.url + "/agentenv/ext/nothing") == (200, {})
    assert await _call("PUT", ext_server.url + "/custom/route", json={"value": "v"}) == (
        200, {"value": "v"})


async def test_invalid_params_bodies(ext_server: RunningServer) -> None:
    url = ext_server.url + "/agentenv/ext/types/echo"
    assert await _call("POST", url, json={}) == (400, _invalid("missing parameter: n"))
    assert await _call("POST", url, json={"n": 1, "zzz": 2}) == (
        400, _invalid("unknown parameter: zzz"))
    assert await _call("POST", url, json={"n": "x"}) == (400, _invalid("invalid value for n"))
    assert await _call("POST", url, data=b"[1, 2]") == (400, _invalid("JSON object"))
    status, _body = await _call("POST", url, json={"n": 1})
    assert status == 200


async def test_error_bodies_exact(ext_server: RunningServer) -> None:
    base = ext_server.url + "/agentenv/ext/"
    assert await _call("POST", base + "refuse") == (429, {"ok": False, "error": {
        "code": "quota_exceeded", "message": "too many", "retryable": True, "applied": "no"}})
    assert await _call("POST", base + "refuse_default") == (400, {"ok": False, "error": {
        "code": "nope", "message": "no way", "retryable": False, "applied": "no"}})
    assert await _call("POST", base + "crash") == (500, {"ok": False, "error": {
        "code": "extension_failed", "message": "boom", "retryable": False,
        "applied": "unknown"}})


async def test_card_advertises_extensions(ext_server: RunningServer) -> None:
    _status, card = await _call("GET", ext_server.url + "/.well-known/agent-env.json")
    exts = {e["uri"]: e for e in card["capabilities"]["extensions"]}
    types = exts["urn:agentenv:types/v1"]
    assert types["params"]["endpoint"] == "/agentenv/ext/types"
    methods = types["params"]["methods"]
    # methods are keyed by handler name: two verbs may share one op route
    assert methods["echo_get"] == {**methods["echo_get"], "method": "GET",
                                   "endpoint": "/agentenv/ext/types/echo"}
    assert methods["echo_post"]["method"] == "POST"
    assert methods["echo_post"]["endpoint"] == "/agentenv/ext/types/echo"
    assert methods["echo_get"]["request"]["properties"]["c"] == {"enum": ["red", "blue"]}
    assert methods["echo_get"]["request"]["required"][:2] == ["flag", "n"]
    assert set(exts["urn:agentenv:misc/v1"]["params"]["methods"]) == {
        "nothing", "refuse", "refuse_default", "crash", "custom"}
    assert exts["urn:agentenv:misc/v1"]["required"] is False
