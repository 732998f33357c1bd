"""Protocol checks against a deployed env, as named pass/fail results (for verifier steps).

Each check runs through the gateway with the deployment's token, as an agent would; the last
check of the core protocol proves the opposite, that a request without the token is refused.
"""

from __future__ import annotations

from typing import Any

import attrs

from agentenv_mcp_env.deployment import GatewayDeployment


@attrs.frozen
class CheckResult:
    name: str
    passed: bool
    why: str


async def check_card(env: GatewayDeployment) -> list[CheckResult]:
    """The composed card parses, has a name, tools with object schemas and named children."""
    from agentenv_protocol.card import EnvironmentCard
    from agentenv_protocol.client import fetch_card_raw
    from agentenv_protocol.errors import TransportError

    try:
        raw = await fetch_card_raw(env.url, headers=env.headers)
    except TransportError as exc:
        return [CheckResult("card served", False, str(exc))]
    results = [CheckResult("card served", True, f"card '{raw.get('name')}'")]
    try:
        EnvironmentCard.from_wire(raw)
        results.append(CheckResult("card parses", True, "the card matches the schema"))
    except Exception as exc:  # any structuring error is the finding
        results.append(CheckResult("card parses", False, f"{type(exc).__name__}: {exc}"))
    tools = ((raw.get("capabilities") or {}).get("tools")) or []
    bad = [t.get("name", "?") for t in tools
           if not isinstance(t.get("inputSchema"), dict)
           or t["inputSchema"].get("type") != "object"]
    results.append(CheckResult(
        "tools have object input schemas", bool(tools) and not bad,
        f"{len(tools)} tools" if tools and not bad else
        ("the card lists no tools" if not tools else f"bad schemas: {', '.join(bad)}")))
    children = raw.get("children_environments") or []
    unnamed = [i for i, c in enumerate(children) if not (isinstance(c, dict) and c.get("name"))]
    results.append(CheckResult(
        "env servers have named cards", bool(children) and not unnamed,
        ", ".join(str(c.get("name")) for c in children) if children and not unnamed
        else "no env server card" if not children else f"unnamed children: {unnamed}"))
    return results


async def check_core_protocol(env: GatewayDeployment) -> list[CheckResult]:
    """initialize, tools/list, a call to an unknown tool, the data plane, /ready, the token."""
    import aiohttp

    from agentenv_protocol.client import McpClient

    results: list[CheckResult] = []
    try:
        async with McpClient(env.mcp_url, client_name="agentenv-verify") as client:
            results.append(CheckResult(
                "initialize", True, f"protocol {client.protocol_version}"))
            tools = await client.list_tools_raw()
            results.append(CheckResult("tools/list", bool(tools), f"{len(tools)} tools"))
            unknown = await client.call_tool("agentenv-no-such-tool", {})
            results.append(CheckResult(
                "unknown tool is a tool error", unknown.is_error,
                unknown.text or "isError set" if unknown.is_error else "no isError"))
    except Exception as exc:  # a failed exchange is the finding
        results.append(CheckResult("mcp session", False, f"{type(exc).__name__}: {exc}"))
    async with aiohttp.ClientSession() as http:
        results.append(await _status(http, "ready", f"{env.capability_url}/ready", 200))
        results.append(await _dataplane(http, env))
        results.append(await _status(http, "a request without the token is refused",
                                     f"{env.url}/ready", 401))
    return results


async def _status(http: Any, name: str, url: str, expected: int) -> CheckResult:
    import aiohttp

    try:
        async with http.get(url, timeout=aiohttp.ClientTimeout(total=10)) as resp:
            status = resp.status
    except Exception as exc:
        return CheckResult(name, False, f"{type(exc).__name__}: {exc}")
    return CheckResult(name, status == expected, f"HTTP {status}")


async def _dataplane(http: Any, env: GatewayDeployment) -> CheckResult:
    """An unknown data-plane method answers JSON-RPC ``-32601`` (the plane is wired)."""
    import aiohttp

    body = {"jsonrpc": "2.0", "id": 1, "method": "data/no-such-method", "params": {}}
    try:
        async with http.post(f"{env.capability_url}/agentenv", json=body,
                             timeout=aiohttp.ClientTimeout(total=10)) as resp:
            reply = await resp.json(content_type=None)
    except Exception as exc:
        return CheckResult("data plane answers JSON-RPC", False, f"{type(exc).__name__}: {exc}")
    code = ((reply or {}).get("error") or {}).get("code")
    return CheckResult("data plane answers JSON-RPC", code == -32601, f"error code {code}")
