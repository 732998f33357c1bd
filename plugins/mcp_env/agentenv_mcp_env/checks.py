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


def _resolved(schema: dict[str, Any], param: dict[str, Any]) -> dict[str, Any]:
    """A parameter's schema with a ``#/$defs/`` reference followed (its own keys win)."""
    ref = str(param.get("$ref", ""))
    if not ref.startswith("#/$defs/"):
        return param
    found = (schema.get("$defs") or {}).get(ref.removeprefix("#/$defs/"))
    return {**found, **{k: v for k, v in param.items() if k != "$ref"}} \
        if isinstance(found, dict) else param


def parameter_issues(schema: dict[str, Any]) -> list[str]:
    """What a tool's input schema leaves a model to guess, as the reference's validator asks:
    a parameter without a type or a description, an array without items, an object without
    properties, an empty enum, an empty ``required`` list."""
    issues: list[str] = []
    properties = schema.get("properties") or {}
    if "required" in schema and properties and not schema["required"]:
        issues.append("its 'required' list is empty")
    for name, raw in properties.items():
        if not isinstance(raw, dict) or not raw:
            issues.append(f"parameter '{name}' has no schema")
            continue
        param = _resolved(schema, raw)
        typed = "type" in param or any(
            isinstance(v, dict) and "type" in _resolved(schema, v)
            for v in param.get("anyOf") or [])
        if not typed:
            issues.append(f"parameter '{name}' has no type")
        if "description" not in param:
            issues.append(f"parameter '{name}' has no description")
        if param.get("type") == "array" and "items" not in param:
            issues.append(f"parameter '{name}' is an array without items")
        if param.get("type") == "object" and "properties" not in param:
            issues.append(f"parameter '{name}' is an object without properties")
        if "enum" in param and not param["enum"]:
            issues.append(f"parameter '{name}' has an empty enum")
    return issues


async def check_mcp_tool_schema(env: GatewayDeployment) -> list[CheckResult]:
    """Every tool, as an agent lists it: described, and each parameter typed and described."""
    from agentenv_protocol.client import McpClient
    from agentenv_protocol.errors import ProtocolError, TransportError

    try:
        async with McpClient(env.mcp_url) as client:
            tools = await client.list_tools()
    except (ProtocolError, TransportError) as exc:
        return [CheckResult("tools listed", False, str(exc))]
    if not tools:
        return [CheckResult("tools listed", False, "the env lists no tool")]
    results = []
    for tool in tools:
        issues = ([] if (tool.description or "").strip() else ["it has no description"])
        issues += parameter_issues(dict(tool.input_schema or {}))
        results.append(CheckResult(f"tool {tool.name}", not issues,
                                   "; ".join(issues) or "described, every parameter typed and "
                                                        "described"))
    return results
