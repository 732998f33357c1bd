"""The agentenv extensions an agent serves: agent-config, mcp-config and trajectory (v1).

Each has its state (what the runtime set), the request models it reads (unknown keys refused,
as the reference's models are ``extra="forbid"``) and its entry on the card, which tells the
runtime which fields a set accepts before it sends one.
"""

from __future__ import annotations

import copy
import re
import secrets
from collections.abc import Mapping
from typing import Any

import attrs

from ..errors import AgentEnvError
from ..schema import type_schema
from .framework import AGENT_CONFIG_V1, MCP_CONFIG_V1, TRAJECTORY_V1
from .models import WRITE_ONLY_KEY, AgentConfig, McpServer
from .trajectory import MAX_LIMIT
from .wire import EXTENSION, describe

CONFIG_PATH = "/ext/agent-config"
MCP_PATH = "/ext/mcp-config"
TRAJECTORY_PATH = "/ext/trajectory"
WRITE_ONLY_MASK = "***"


def bad_request(message: str, code: str = "invalid_params", status: int = 400) -> AgentEnvError:
    return AgentEnvError(code, message, status=status)


def read_body(raw: Any, cls: type[Any]) -> Any:
    """Structure an extension body, strictly; AgentEnvError (400) naming the problem."""
    if not isinstance(raw, Mapping):
        raise bad_request("body must be a JSON object")
    try:
        return EXTENSION.structure(dict(raw), cls)
    except Exception as exc:
        raise bad_request(describe(exc, path="body", camel_case=False)) from None


# -- agent-config/v1 -----------------------------------------------------------------------


class ConfigState:
    """The config the runtime set: partial sets merge; a turn gets a copy at send time."""

    def __init__(self, cls: type[AgentConfig]) -> None:
        self.cls = cls
        self.fields = {f.name: f for f in attrs.fields(cls) if f.init}
        self.explicit: dict[str, Any] = {}
        self.current: AgentConfig = cls()

    def set(self, body: Any) -> None:
        if not isinstance(body, Mapping):
            raise bad_request("body must be a JSON object")
        unknown = sorted(set(body) - set(self.fields))
        if unknown:
            raise bad_request(f"unknown config field(s): {', '.join(unknown)}; "
                              f"known: {', '.join(self.fields)}")
        merged = {**self.explicit, **body}
        try:
            current = EXTENSION.structure(merged, self.cls)
        except Exception as exc:
            raise bad_request(describe(exc, path="config", camel_case=False)) from None
        self.explicit, self.current = merged, current

    def readback(self) -> dict[str, Any]:
        """Only what was explicitly set; write-only fields masked."""
        return {k: WRITE_ONLY_MASK if self.fields[k].metadata.get(WRITE_ONLY_KEY) else v
                for k, v in self.explicit.items()}

    def snapshot(self) -> AgentConfig:
        return copy.deepcopy(self.current)

    def card_entry(self) -> dict[str, Any]:
        schema = type_schema(self.cls)
        return {
            "uri": AGENT_CONFIG_V1,
            "description": "Configure the agent: a partial set merges into earlier sets.",
            "params": {
                "endpoint": CONFIG_PATH,
                "methods": {
                    "set": {"method": "POST", "endpoint": CONFIG_PATH,
                            "request": {"supported": list(self.fields), "schema": schema},
                            "response": {"status": "updated"}},
                    "get": {"method": "GET", "endpoint": CONFIG_PATH,
                            "response": {"config": "object"}},
                },
            },
        }


# -- mcp-config/v1 -------------------------------------------------------------------------


@attrs.define
class McpAdd:
    url: str
    headers: dict[str, str] | None = None
    name: str | None = None


_URL = re.compile(r"^https?://[^\s/]+", re.IGNORECASE)


class McpState:
    """The MCP servers the runtime registered, by name; names and URLs are each unique."""

    def __init__(self) -> None:
        self.servers: dict[str, McpServer] = {}

    def add(self, body: Any) -> McpServer:
        req: McpAdd = read_body(body, McpAdd)
        if not _URL.match(req.url):
            raise bad_request(f"url must be an http(s) URL, got {req.url!r}")
        if req.name is not None and not req.name.strip():
            raise bad_request("name must not be empty")
        name = req.name or self._fresh_name()
        if name in self.servers:
            raise bad_request(f"an MCP server named {name!r} is already configured",
                              code="conflict", status=409)
        if any(s.url == req.url for s in self.servers.values()):
            raise bad_request(f"an MCP server with url {req.url!r} is already configured",
                              code="conflict", status=409)
        server = McpServer(name, req.url, dict(req.headers or {}))
        self.servers[name] = server
        return server

    def _fresh_name(self) -> str:
        while True:
            name = f"mcp_{secrets.token_hex(4)}"
            if name not in self.servers:
                return name

    def listing(self) -> dict[str, Any]:
        return {"mcp_servers": {n: {"url": s.url, "has_headers": bool(s.headers)}
                                for n, s in self.servers.items()}}

    def snapshot(self) -> dict[str, McpServer]:
        return dict(self.servers)

    @staticmethod
    def card_entry() -> dict[str, Any]:
        return {
            "uri": MCP_CONFIG_V1,
            "description": "Give the agent MCP servers (the env's tools) to use.",
            "params": {
                "endpoint": MCP_PATH,
                "methods": {
                    "add": {"method": "POST", "endpoint": MCP_PATH,
                            "request": {"required": ["url"], "optional": ["headers", "name"]},
                            "response": {"status": "added", "name": "string", "url": "string"}},
                    "list": {"method": "GET", "endpoint": MCP_PATH,
                             "response": {"mcp_servers": "object"}},
                },
            },
        }


# -- trajectory/v1 -------------------------------------------------------------------------


@attrs.define
class TrajectoryQuery:
    task_id: str | None = None
    context_id: str | None = None
    after: int | None = None
    limit: int | None = None
    objects: dict[str, Any] | None = None

    def check(self) -> None:
        if (self.task_id is None) == (self.context_id is None):
            raise bad_request("give exactly one of task_id or context_id")
        if self.objects is not None:
            if self.after is not None or self.limit is not None:
                raise bad_request("objects is for a whole trajectory, not a cursor read")
            if set(self.objects) != {"trajectory"}:
                raise bad_request("objects takes exactly one entry, trajectory "
                                  "(a WriteObject)")
            return
        if self.after is None:
            if self.limit is not None:
                raise bad_request("limit needs after (a cursor read)")
            return
        if self.after < 0:
            raise bad_request("after must be >= 0")
        if self.limit is not None and not 1 <= self.limit <= MAX_LIMIT:
            raise bad_request(f"limit must be between 1 and {MAX_LIMIT}")


def trajectory_card_entry() -> dict[str, Any]:
    return {
        "uri": TRAJECTORY_V1,
        "description": "Read what the agent did in a turn: whole, or page by page while live.",
        "params": {
            "endpoint": TRAJECTORY_PATH,
            "live": True,
            # the object form: a whole trajectory uploaded through a WriteObject grant
            "objects": ["trajectory"],
            "methods": {
                "get": {
                    "method": "POST", "endpoint": TRAJECTORY_PATH,
                    "request": {"oneOf": [
                        {"required": ["task_id"], "optional": ["objects"]},
                        {"required": ["context_id"], "optional": ["objects"]},
                        {"required": ["task_id", "after"], "optional": ["limit"]},
                        {"required": ["context_id", "after"], "optional": ["limit"]},
                    ]},
                    "response": {"oneOf": [
                        {"trajectory": "array"},
                        {"objects": {"trajectory": "Uploaded"}},
                        {"context_id": "string", "task_id": "string", "state": "string",
                         "format": "string", "events": "array", "next": "integer",
                         "has_more": "boolean"},
                    ]},
                },
            },
        },
    }
