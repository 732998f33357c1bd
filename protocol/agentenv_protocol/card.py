"""The environment card (``/.well-known/agent-env.json``) as attrs classes, with one converter.

The JSON shape lives in the converter (camelCase names, nulls present on the card, extra keys
from newer peers ignored); the classes stay plain.
"""

from __future__ import annotations

from typing import Any

import attrs
import cattrs
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override

CARD_PATH = "/.well-known/agent-env.json"
PROTOCOL_VERSION = "1.0"
DATA_OPERATIONS = ("data/reset", "data/add", "data/get")


@attrs.define(frozen=True)
class ToolInfo:
    """A tool as listed on the card and by MCP ``tools/list``."""

    name: str
    description: str = ""
    input_schema: dict[str, Any] = attrs.field(factory=lambda: {"type": "object"})
    annotations: dict[str, Any] | None = None
    meta: dict[str, Any] | None = None

    @property
    def hidden_by_default(self) -> bool:
        return bool((self.meta or {}).get("agentenv.io/hiddenByDefault"))


@attrs.define(frozen=True)
class ExtensionInfo:
    """An advertised extension: ``params`` holds ``endpoint`` and per-method routes/schemas."""

    uri: str
    description: str | None = None
    params: dict[str, Any] | None = None
    required: bool = False


@attrs.define(frozen=True)
class Interface:
    url: str
    transport: str


@attrs.define(frozen=True)
class Capabilities:
    extensions: list[ExtensionInfo] | None = None
    tools: list[ToolInfo] | None = None
    operations: list[str] | None = None


@attrs.define(frozen=True)
class EnvironmentCard:
    """What an env server (or a gateway, with its children) says about itself."""

    name: str
    protocol_version: str = PROTOCOL_VERSION
    url: str = "/agentenv"
    preferred_transport: str = "JSONRPC"
    additional_interfaces: list[Interface] = attrs.field(
        factory=lambda: [Interface("/mcp", "mcp")]
    )
    capabilities: Capabilities = attrs.field(factory=Capabilities)
    children_environments: list[EnvironmentCard] | None = None

    @property
    def mcp_path(self) -> str:
        """First interface with transport ``mcp``, else ``/mcp``."""
        for iface in self.additional_interfaces:
            if iface.transport == "mcp":
                return iface.url
        return "/mcp"

    @property
    def operations(self) -> tuple[str, ...]:
        """Data-plane methods served; an old card without the field serves all three."""
        ops = self.capabilities.operations
        return tuple(DATA_OPERATIONS) if ops is None else tuple(ops)

    @property
    def tool_names(self) -> list[str]:
        return [t.name for t in self.capabilities.tools or []]

    def to_wire(self) -> dict[str, Any]:
        return card_converter.unstructure(self)

    @classmethod
    def from_wire(cls, raw: dict[str, Any]) -> EnvironmentCard:
        return card_converter.structure(raw, cls)


def _make_converter() -> cattrs.Converter:
    conv = cattrs.Converter()
    renames: dict[type, dict[str, str]] = {
        ToolInfo: {"input_schema": "inputSchema", "meta": "_meta"},
        EnvironmentCard: {
            "protocol_version": "protocolVersion",
            "preferred_transport": "preferredTransport",
            "additional_interfaces": "additionalInterfaces",
        },
    }
    for cls in (ToolInfo, ExtensionInfo, Interface, Capabilities, EnvironmentCard):
        names = renames.get(cls, {})
        un_overrides = {k: override(rename=v) for k, v in names.items()}
        if cls is ToolInfo:
            # the card's Tool is exactly {name, description, inputSchema}
            un_overrides["annotations"] = override(omit_if_default=True)
            un_overrides["meta"] = override(rename="_meta", omit_if_default=True)
        # ``**overrides`` only ever names fields; mypy cannot tell that its keys never hit the
        # positional ``_cattrs_*`` flags the unpacking could also fill, so it flags the call
        conv.register_unstructure_hook(
            cls, make_dict_unstructure_fn(cls, conv, **un_overrides)  # type: ignore[arg-type]
        )
        st_overrides = {k: override(rename=v) for k, v in names.items()}
        conv.register_structure_hook(
            cls, make_dict_structure_fn(cls, conv, **st_overrides)  # type: ignore[arg-type]
        )
    return conv


card_converter = _make_converter()


def tool_to_mcp(tool: ToolInfo) -> dict[str, Any]:
    """A tool as MCP ``tools/list`` lists it (``annotations`` and ``_meta`` only when set)."""
    return card_converter.unstructure(tool)


def tool_from_mcp(raw: dict[str, Any]) -> ToolInfo:
    return ToolInfo(
        name=raw["name"],
        description=raw.get("description") or "",
        input_schema=raw.get("inputSchema") or {"type": "object"},
        annotations=raw.get("annotations"),
        meta=raw.get("_meta"),
    )
