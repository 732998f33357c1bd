"""The model gateway as the ``model-gateway`` container serves it (in-process here): scripted
models loaded over the admin route, call records for AgentEnv only, no upstream -> a clear 400."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import pytest

from agentenv_agents.gateway_server import DispatchUpstream, ServedGateway

TOKEN, ADMIN = "agent-token-1234", "admin-token-5678"
SCRIPT = {"turns": [{"text": "hello from the script"}]}


@pytest.fixture
async def gateway() -> AsyncIterator[str]:
    served = ServedGateway(DispatchUpstream(), token=TOKEN, admin_token=ADMIN,
                           host="127.0.0.1", port=0)
    url = await served.start()
    yield url
    await served.stop()


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def chat(http: aiohttp.ClientSession, url: str, model: str) -> tuple[int, dict]:
    async with http.post(f"{url}/v1/chat/completions", headers=bearer(TOKEN), json={
            "model": model, "messages": [{"role": "user", "content": "hi"}]}) as resp:
        return resp.status, await resp.json()


async def test_a_loaded_script_answers_as_its_scripted_model_and_is_recorded(
        gateway: str) -> None:
    async with aiohttp.ClientSession() as http:
        async with http.post(f"{gateway}/admin/scripts", headers=bearer(ADMIN),
                             json={"name": "demo", "script": SCRIPT}) as resp:
            assert resp.status == 200
            assert await resp.json() == {"model": "scripted:demo"}
        status, body = await chat(http, gateway, "scripted:demo")
        assert status == 200
        assert body["model"] == "scripted:demo"
        assert body["choices"][0]["message"]["content"] == "hello from the script"
        async with http.get(f"{gateway}/calls", headers=bearer(ADMIN)) as resp:
            records = await resp.json()
        assert records["count"] == 1
        (call,) = records["calls"]
        assert call["model"] == "scripted:demo" and call["status"] == 200
        assert call["input_tokens"] > 0 and call["output_tokens"] > 0
        async with http.get(f"{gateway}/calls", params={"after": "1"},
                            headers=bearer(ADMIN)) as resp:
            assert (await resp.json())["calls"] == []


async def test_admin_routes_refuse_the_agents_token(gateway: str) -> None:
    async with aiohttp.ClientSession() as http:
        for method, path in (("GET", "/calls"), ("POST", "/admin/scripts")):
            async with http.request(method, f"{gateway}{path}", headers=bearer(TOKEN),
                                    json={"name": "x", "script": SCRIPT}) as resp:
                assert resp.status == 401


async def test_without_an_upstream_other_models_are_refused_saying_why(gateway: str) -> None:
    async with aiohttp.ClientSession() as http:
        status, body = await chat(http, gateway, "gpt-test")
        assert status == 400
        assert "no upstream is configured" in body["error"]["message"]
        status, body = await chat(http, gateway, "scripted:missing")
        assert status == 400
        assert "no scripted model 'scripted:missing' is loaded" in body["error"]["message"]


def test_the_admin_token_must_differ_from_the_agents() -> None:
    with pytest.raises(ValueError, match="differ"):
        ServedGateway(DispatchUpstream(), token=TOKEN, admin_token=TOKEN)


async def test_call_records_leave_memory_and_come_back_in_pages(gateway: str) -> None:
    """Issue 31, class 6: 6 calls of 3 MB used to stay in the gateway's memory for its life
    (every request whole, in a list); they are kept on disk and read back a page at a time."""
    import gc
    import tracemalloc

    from agentenv_agents.a2a_type import ModelGatewayHandle

    big = "x" * (3 * 2**20)
    async with aiohttp.ClientSession() as http:
        async with http.post(f"{gateway}/admin/scripts", headers=bearer(ADMIN),
                             json={"name": "demo", "script": SCRIPT}) as resp:
            assert resp.status == 200
        await chat(http, gateway, "scripted:demo")  # warm: first-call allocations are not ours
        gc.collect()
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            for _ in range(6):
                async with http.post(f"{gateway}/v1/chat/completions", headers=bearer(TOKEN),
                                     json={"model": "scripted:demo", "messages": [
                                         {"role": "user", "content": big}]}) as resp:
                    assert resp.status == 200
                    await resp.read()
            gc.collect()
            kept = tracemalloc.get_traced_memory()[0] - before
        finally:
            tracemalloc.stop()
        assert kept < 4 * 2**20, f"the gateway kept {kept / 2**20:.1f} MiB after 18 MiB of calls"
        async with http.get(f"{gateway}/calls", headers=bearer(ADMIN)) as resp:
            page = await resp.json()
        assert page["count"] == 7 and 1 <= len(page["calls"]) < 7  # a page, not everything
        for bad in ("abc", "-1", "1e3"):
            async with http.get(f"{gateway}/calls", params={"after": bad},
                                headers=bearer(ADMIN)) as resp:
                assert resp.status == 400
                assert "whole number" in (await resp.json())["error"]
        async with http.post(f"{gateway}/v1/chat/completions", data=b"x" * (33 * 2**20),
                             headers={**bearer(TOKEN), "Content-Type": "application/json"}
                             ) as resp:
            assert resp.status == 413  # over the 32 MiB cap
    handle = ModelGatewayHandle(gateway, TOKEN, ADMIN, "gateway-image", None)
    calls = await handle.calls()
    assert len(calls) == 7 and all(c["status"] == 200 for c in calls)
    assert [len(c["request"]["messages"][0]["content"]) for c in calls[1:]] == [len(big)] * 6
    assert len(await handle.calls(5)) == 2


async def test_deeply_nested_json_is_a_400_not_a_500(gateway: str) -> None:
    """Issue 31, class 16: 50k-deep JSON to the model gateway was a 500 (RecursionError)."""
    async with aiohttp.ClientSession() as http:
        async with http.post(f"{gateway}/v1/chat/completions", data=b"[" * 50_000 + b"]" * 50_000,
                             headers={**bearer(TOKEN), "Content-Type": "application/json"}
                             ) as resp:
            assert resp.status == 400
            assert "not a JSON object" in (await resp.json())["error"]["message"]
