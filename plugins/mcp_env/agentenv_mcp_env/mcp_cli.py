"""``build_mcp_cli``: a command-line program over an env's MCP tools, stored as a ``cli``
artifact.

Why: some agents work best in a shell (coding CLIs, bash-only agents), and some have no MCP
client at all. The generated program is one Python file using only the standard library, so it
runs in any agent image with a ``python3``. It reads the env's gateway from
``AGENT_ENV_GATEWAY_URL`` (environment, else the ``.env`` that ``load_artifact`` writes beside
it when it installs a ``cli`` artifact into an agent) and asks the gateway for the tools at
every call, so tool access rules for the caller's role (``AGENT_ENV_ROLE``) hold::

    notes list                       # the tools, one line each
    notes add_note --help            # one tool's parameters, from its input schema
    notes add_note --title hi --body 'text'
    notes add_note --json '{"title": "hi", "body": "text"}'

Parameters are typed by the tool's schema (a number, a boolean, JSON for arrays and objects);
the tool's text goes to stdout; a tool error exits 1 with its text on stderr; an unreachable
gateway exits 2.

The step stores the program as the next version of ``cli_artifact_id`` (default
``<env name>-cli``) and lists the tools it saw through the gateway; a later ``load_artifact``
with ``artifact_from_step_id`` naming this step installs it into an agent (``agent_name`` and
``env_id``).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import attrs

from agent_env.api import PreflightView, Step, StepError

if TYPE_CHECKING:
    from agent_env.api import TaskContext

_COMMAND = re.compile(r"^[a-zA-Z][a-zA-Z0-9_-]*$")

SCRIPT = r'''#!/usr/bin/env python3
"""__COMMAND__: the tools of the __ENV__ env as commands (made by AgentEnv's build_mcp_cli).

Usage: __COMMAND__ list | __COMMAND__ TOOL --help | __COMMAND__ TOOL [--PARAM VALUE ...]
       __COMMAND__ TOOL --json '{...}'
"""
import json
import os
import pathlib
import sys
import urllib.error
import urllib.request

COMMAND = "__COMMAND__"
PROTOCOL = "2025-06-18"


def gateway():
    url = os.environ.get("AGENT_ENV_GATEWAY_URL")
    if not url:
        here = pathlib.Path(__file__).resolve().parent
        for folder in (here, here.parent):
            env = folder / ".env"
            if env.is_file():
                for line in env.read_text().splitlines():
                    key, _, value = line.partition("=")
                    if key.strip() == "AGENT_ENV_GATEWAY_URL":
                        url = value.strip()
                break
    if not url:
        sys.exit(f"{COMMAND}: no gateway: set AGENT_ENV_GATEWAY_URL (load_artifact writes it "
                 "to .env beside this program)")
    return url.rstrip("/") + "/mcp"


class Session:
    def __init__(self):
        self.url, self.sid, self.next_id = gateway(), None, 0

    def post(self, method, params):
        self.next_id += 1
        body = json.dumps({"jsonrpc": "2.0", "id": self.next_id, "method": method,
                           "params": params}).encode()
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.sid:
            headers["Mcp-Session-Id"] = self.sid
            headers["MCP-Protocol-Version"] = PROTOCOL
        role = os.environ.get("AGENT_ENV_ROLE")
        if role:
            headers["AgentEnv-Role"] = role
        request = urllib.request.Request(self.url, body, headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=float(
                    os.environ.get("AGENT_ENV_CLI_TIMEOUT", "300"))) as reply:
                self.sid = reply.headers.get("Mcp-Session-Id") or self.sid
                answer = json.loads(reply.read().decode() or "{}")
        except urllib.error.HTTPError as exc:
            text = exc.read().decode(errors="replace")[:300]
            sys.stderr.write(f"{COMMAND}: the gateway answered HTTP {exc.code}: {text}\n")
            sys.exit(2)
        except (urllib.error.URLError, OSError) as exc:
            sys.stderr.write(f"{COMMAND}: cannot reach the gateway: {exc}\n")
            sys.exit(2)
        if "error" in answer:
            sys.stderr.write(f"{COMMAND}: {answer['error'].get('message', answer['error'])}\n")
            sys.exit(2)
        return answer.get("result") or {}

    def open(self):
        self.post("initialize", {"protocolVersion": PROTOCOL, "capabilities": {},
                                 "clientInfo": {"name": COMMAND, "version": "1"}})
        return self

    def tools(self):
        found, cursor = [], None
        while True:
            page = self.post("tools/list", {"cursor": cursor} if cursor else {})
            found += page.get("tools") or []
            cursor = page.get("nextCursor")
            if not cursor:
                return found


def value_of(text, schema):
    kind = schema.get("type")
    if kind in ("integer", "number", "boolean", "array", "object"):
        try:
            return json.loads(text)
        except ValueError:
            if kind == "boolean" and text.lower() in ("yes", "no"):
                return text.lower() == "yes"
            raise SystemExit(f"{COMMAND}: {text!r} is not a {kind}")
    return text


def usage(tool):
    schema = tool.get("inputSchema") or {}
    required = set(schema.get("required") or [])
    lines = [f"{COMMAND} {tool['name']}: {tool.get('description') or ''}".rstrip(), ""]
    for name, spec in (schema.get("properties") or {}).items():
        need = "required" if name in required else "optional"
        lines.append(f"  --{name} ({spec.get('type', 'any')}, {need})  "
                     f"{spec.get('description') or ''}".rstrip())
    lines.append(f"  --json OBJECT  all arguments as one JSON object")
    return "\n".join(lines)


def call(session, tool, argv):
    schema = tool.get("inputSchema") or {}
    properties = schema.get("properties") or {}
    arguments = {}
    rest = list(argv)
    while rest:
        flag = rest.pop(0)
        if flag in ("-h", "--help"):
            print(usage(tool))
            return 0
        if not flag.startswith("--") or not rest:
            raise SystemExit(f"{COMMAND} {tool['name']}: expected --PARAM VALUE, got {flag!r} "
                             f"(see {COMMAND} {tool['name']} --help)")
        name, text = flag[2:], rest.pop(0)
        if name == "json":
            try:
                given = json.loads(text)
            except ValueError as exc:
                raise SystemExit(f"{COMMAND}: --json is not JSON: {exc}")
            if not isinstance(given, dict):
                raise SystemExit(f"{COMMAND}: --json takes an object")
            arguments.update(given)
            continue
        key = name if name in properties else name.replace("-", "_")
        if key not in properties:
            raise SystemExit(f"{COMMAND} {tool['name']}: no parameter --{name} (it takes: "
                             f"{', '.join('--' + p for p in properties) or 'none'})")
        arguments[key] = value_of(text, properties[key])
    missing = [p for p in schema.get("required") or [] if p not in arguments]
    if missing:
        raise SystemExit(f"{COMMAND} {tool['name']}: missing --{', --'.join(missing)}")
    result = session.post("tools/call", {"name": tool["name"], "arguments": arguments})
    text = "\n".join(part.get("text", "") for part in result.get("content") or []
                     if part.get("type") == "text")
    if not text and result.get("structuredContent") is not None:
        text = json.dumps(result["structuredContent"])
    if result.get("isError"):
        sys.stderr.write(text + "\n")
        return 1
    print(text)
    return 0


def main(argv):
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0
    session = Session().open()
    tools = {tool["name"]: tool for tool in session.tools()}
    if argv[0] == "list":
        for name, tool in tools.items():
            summary = (tool.get("description") or "").strip().splitlines()
            print(f"{name}\t{summary[0] if summary else ''}")
        return 0
    tool = tools.get(argv[0]) or tools.get(argv[0].replace("-", "_"))
    if tool is None:
        sys.stderr.write(f"{COMMAND}: no tool {argv[0]!r} (try: {COMMAND} list)\n")
        return 2
    return call(session, tool, argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
'''


def cli_script(command_name: str, environment_name: str) -> str:
    """The program for ``command_name`` over the tools of env ``environment_name``."""
    return (SCRIPT.replace("__COMMAND__", command_name)
            .replace("__ENV__", environment_name.replace('"', "'")))


@attrs.define(kw_only=True)
class BuildMcpCli(Step):
    """Store a command-line program over a deployed env's tools as a ``cli`` artifact."""

    type = "build_mcp_cli"
    example = {'id': 'cli', 'type': 'build_mcp_cli', 'env_id': 'notes', 'command_name': 'notes'}
    entity_fields = {"env_id": "envs"}

    env_id: str
    command_name: str
    cli_artifact_id: str | None = None

    def check(self, view: PreflightView) -> list[str]:
        problems = super().check(view)
        if not _COMMAND.match(self.command_name):
            problems.append(f"command_name '{self.command_name}' must be one word: a letter, "
                            "then letters, digits, '_' or '-'")
        if self.cli_artifact_id is not None and (
                not self.cli_artifact_id.strip() or any(c.isspace()
                                                        for c in self.cli_artifact_id)):
            problems.append(f"cli_artifact_id {self.cli_artifact_id!r} must be an id without "
                            "spaces")
        return problems

    async def run(self, ctx: TaskContext) -> None:
        from agent_env.api import CLI, CliSpec, put_artifact_bytes
        from agentenv_mcp_env.steps import deployment
        from agentenv_protocol.client import McpClient

        env = deployment(ctx, self.env_id)
        name = env.environment_name or self.env_id.rsplit("/", 1)[-1]
        try:
            async with McpClient(env.mcp_url) as client:
                tools = [tool.name for tool in await client.list_tools()]
        except Exception as exc:  # the env's gateway, as the CLI will reach it
            raise StepError(f"cannot list the tools of env {name}: {exc}") from None
        artifact_id = self.cli_artifact_id or f"{name}-cli"
        entrypoint = f"bin/{self.command_name}"
        line = put_artifact_bytes(
            artifact_id, CLI, {entrypoint: cli_script(self.command_name, name).encode()},
            f"artifact {artifact_id}", cli=CliSpec(self.command_name, entrypoint, self.env_id),
            modes={entrypoint: 0o755})
        ctx.note(f"cli {self.command_name} over {len(tools)} tools of {name}: artifact "
                 f"{artifact_id} v{line.version}")
        output = {"artifact_id": artifact_id, "artifact_version": line.version,
                  "command_name": self.command_name, "entrypoint": entrypoint, "tools": tools}
        ctx.outputs[self.id] = output
        ctx.metadata["cli_artifact"] = {"id": artifact_id, "version": line.version,
                                        "type": CLI}
