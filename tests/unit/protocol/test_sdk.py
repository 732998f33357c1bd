"""The env-author SDK: decorators, naming, registry, card, parts and access rules."""

from __future__ import annotations

from typing import Any

import pytest

from agentenv_protocol import (
    AgentEnvEnvironment,
    ToolContext,
    add_data,
    environment_card,
    extension,
    get_data,
    reset_data,
    tool,
)
from agentenv_protocol.access import ToolAccessRules, normalise_role
from agentenv_protocol.card import EnvironmentCard
from agentenv_protocol.env import extension_slug, tool_result
from agentenv_protocol.parts import (
    DataPart,
    FileContent,
    FilePart,
    PartError,
    TextPart,
    part_to_wire,
    parts_from_wire,
)


def test_unknown_card_key_raises_at_definition() -> None:
    with pytest.raises(TypeError, match="colour"):
        @environment_card(name="x", colour="red")
        class Bad(AgentEnvEnvironment):
            pass


def test_duplicate_tool_names_raise() -> None:
    with pytest.raises(ValueError, match="duplicate tool name"):
        class Dup(AgentEnvEnvironment):
            @tool(name="a")
            def one(self) -> None: ...

            @tool(name="a")
            def two(self) -> None: ...


def test_naming_precedence(monkeypatch: pytest.MonkeyPatch) -> None:
    class Plain(AgentEnvEnvironment):
        @tool
        def ping(self) -> str:
            """Bare @tool is accepted; the docstring is the description."""
            return "pong"

    @environment_card(name="carded")
    class Carded(AgentEnvEnvironment):
        @tool(name="{environment_name}_go")
        def go(self) -> None: ...

    monkeypatch.delenv("ENVIRONMENT_NAME", raising=False)
    assert Plain().environment_name == "Plain"
    tools = Plain().agentenv_registry().tools
    assert tools["ping"].description.startswith("Bare @tool")
    assert list(Carded().agentenv_registry().tools) == ["carded_go"]
    monkeypatch.setenv("ENVIRONMENT_NAME", "fromenv")
    assert list(Carded().agentenv_registry().tools) == ["fromenv_go"]


def test_card_reflects_handlers_and_context_param_is_hidden() -> None:
    @environment_card(name="c")
    class C(AgentEnvEnvironment):
        @tool(name="t", hidden_by_default=True, meta={"k": 1}, annotations={"readOnlyHint": True})
        def t(self, ctx: ToolContext, n: int) -> int:
            return n

        @reset_data
        def r(self) -> None: ...

        @get_data
        def g(self) -> list[Any]:
            return []

        @extension("urn:agentenv:data-objects/v1", op="put", method="PUT")
        def put(self, key: str) -> None: ...

    env = C()
    card = EnvironmentCard.from_wire(env.agentenv_card())
    assert card.operations == ("data/reset", "data/get")
    assert card.capabilities.tools[0].input_schema["properties"] == {  # type: ignore[index]
        "n": {"type": "integer"}}
    wire = env.agentenv_card()
    assert set(wire["capabilities"]["tools"][0]) == {"name", "description", "inputSchema"}
    listing = env.agentenv_registry().tools["t"].mcp_listing()
    assert listing["_meta"] == {"k": 1, "agentenv.io/hiddenByDefault": True}
    assert listing["annotations"] == {"readOnlyHint": True}
    ext = wire["capabilities"]["extensions"][0]
    assert ext["params"]["endpoint"] == "/agentenv/ext/data-objects"
    assert ext["params"]["methods"]["put"]["endpoint"] == "/agentenv/ext/data-objects/put"


def test_old_card_without_operations_means_all() -> None:
    card = EnvironmentCard.from_wire({"name": "old", "capabilities": {"tools": None}})
    assert card.operations == ("data/reset", "data/add", "data/get")
    assert card.mcp_path == "/mcp"


def test_extension_slug() -> None:
    assert extension_slug("urn:agentenv:clock/v1") == "clock"
    assert extension_slug("urn:agentenv:data-objects/v12") == "data-objects"


def test_tool_results() -> None:
    assert tool_result("x") == {"content": [{"type": "text", "text": "x"}], "isError": False}
    assert tool_result({"a": 1})["structuredContent"] == {"a": 1}
    assert tool_result([1, 2])["content"][0]["text"] == "[1, 2]"
    assert tool_result(None) == {"content": [], "isError": False}


def test_parts_round_trip_and_validation() -> None:
    wire = [{"kind": "text", "text": "t", "metadata": {"a": 1}},
            {"kind": "file", "file": {"uri": "file:///x", "mimeType": "text/plain"}},
            {"kind": "data", "data": {"k": [1]}}]
    parts = parts_from_wire(wire)
    assert parts == [TextPart("t", {"a": 1}), FilePart(FileContent(uri="file:///x",
                                                                    mime_type="text/plain")),
                     DataPart({"k": [1]})]
    assert [part_to_wire(p) for p in parts] == wire
    for bad in ([], [{"kind": "file", "file": {"bytes": "a", "uri": "b"}}],
                [{"kind": "text", "text": "x", "metadata": 3}], None):
        with pytest.raises(PartError):
            parts_from_wire(bad)
    assert part_to_wire({"kind": "text", "text": "x", "metadata": None}) == {
        "kind": "text", "text": "x"}


def test_add_data_marker_forms() -> None:
    class E(AgentEnvEnvironment):
        @add_data()
        def add(self, parts: list[Any]) -> None: ...

    assert list(E().agentenv_registry().data) == ["data/add"]


def test_access_rules_lookup_order() -> None:
    rules = ToolAccessRules()
    tools = {"a": False, "b": False, "h": True}
    assert rules.allowed(None, "a") and not rules.allowed(None, "h", hidden=True)
    rules.apply({"role": "*", "tools": "*"}, allow=False, tools=tools)
    assert not rules.allowed("x", "a")
    rules.apply({"role": "x", "tools": ["a"]}, allow=True, tools=tools)
    assert rules.allowed("x", "a") and not rules.allowed("x", "b")
    rules.apply({"role": "x", "tools": "*"}, allow=True, tools=tools)
    assert rules.allowed("x", "b")
    assert not rules.allowed("x", "h", hidden=True)  # hidden skips "*" rules
    out = rules.apply({"role": "x", "tools": ["h"]}, allow=True, tools=tools)
    assert out == {"role": "x", "disabled": [], "allowed": ["a", "b", "h"]}
    rules.apply({"role": "*", "tools": "*"}, allow=True, tools=tools)
    assert not rules and rules.allowed("y", "a")
    assert normalise_role(" default ") is None and normalise_role("") is None
    assert normalise_role("agent") == "agent"
