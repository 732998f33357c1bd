"""Does an env do what its description says? Two validators of an MCP env.

Why: an env author who publishes an OpenAPI description of the service behind an env, or asks
an agent to exercise every tool, wants the drift between the promise and the tools found
before an eval spends money on the env.

* ``verify_spec_conformance`` diffs an OpenAPI spec against the env's live ``tools/list`` on
  the request side: each operation's ``operationId`` must be a tool, each parameter (path,
  query, header, and the JSON body's properties) an argument of the same type, enum and
  required-ness. The spec is a floor: a tool or argument it does not describe is reported but
  does not fail (``extra_tool``, ``extra_param``), except an argument the tool *requires*
  (``extra_required_param``: no caller following the spec can give it). ``service`` strips a
  ``<service>_`` prefix on both sides before names are compared. The spec comes from
  ``spec_artifact_id`` (a file artifact holding one JSON or YAML file; ours), else from each
  server at ``/openapi.yaml`` through the gateway (the reference's "baked spec"); none found
  is not scored, not a failure. One row per operation.
* ``verify_mcp_env_assessment`` grades an agent's own report on the env's tools: the reply to
  ``prompt_id`` must be JSON ``{"results": [{"tool", "passed", ...}]}``; one row per tool, and
  a reply that is not that JSON, or lists no tool, is one failed row saying so.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import attrs

from agent_env.api import PreflightView, ScoreRow, Step, StepError, find_reply

if TYPE_CHECKING:
    from agent_env.api import TaskContext

_METHODS = ("get", "post", "put", "delete", "patch", "head", "options", "trace")
#: Findings that fail an operation; the others are reported only.
BLOCKING = frozenset({"missing_tool", "missing_param", "type_mismatch", "enum_mismatch",
                      "required_mismatch", "extra_required_param", "ambiguous_tool"})
#: Where a server publishes its spec (the reference's "baked spec"); not ``/openapi.json``,
#: which a FastAPI app serves for its own HTTP routes, not its tools.
_SPEC_PATHS = ("/openapi.yaml",)


def _resolve(node: Any, spec: dict[str, Any]) -> Any:
    """``node`` with ``#/...`` ``$ref`` pointers followed (cycles left as they are)."""
    seen: set[str] = set()
    while isinstance(node, dict) and isinstance(node.get("$ref"), str):
        ref = node["$ref"]
        if not ref.startswith("#/") or ref in seen:
            return node
        seen.add(ref)
        target: Any = spec
        for part in ref[2:].split("/"):
            target = target.get(part) if isinstance(target, dict) else None
        if not isinstance(target, dict):
            return node
        node = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
    return node


def spec_operations(spec: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """operationId -> {param: {type, enum, required}} from the spec's paths."""
    found: dict[str, dict[str, Any]] = {}
    for path_item in (spec.get("paths") or {}).values():
        path_item = _resolve(path_item, spec)
        if not isinstance(path_item, dict):
            continue
        shared = path_item.get("parameters") or []
        for method in _METHODS:
            op = _resolve(path_item.get(method), spec)
            if not isinstance(op, dict) or not isinstance(op.get("operationId"), str):
                continue
            params: dict[str, Any] = {}
            for raw in [*shared, *(op.get("parameters") or [])]:
                param = _resolve(raw, spec)
                if isinstance(param, dict) and isinstance(param.get("name"), str):
                    schema = _resolve(param.get("schema") or {}, spec)
                    params[param["name"]] = {"type": schema.get("type"),
                                             "enum": schema.get("enum"),
                                             "required": bool(param.get("required"))}
            body = _resolve(op.get("requestBody") or {}, spec)
            content = (body.get("content") or {}) if isinstance(body, dict) else {}
            schema = _resolve((content.get("application/json") or {}).get("schema") or {}, spec)
            required = set(schema.get("required") or []) if isinstance(schema, dict) else set()
            for name, prop in ((schema or {}).get("properties") or {}).items():
                prop = _resolve(prop, spec)
                params[name] = {"type": prop.get("type"), "enum": prop.get("enum"),
                                "required": name in required}
            found[op["operationId"]] = params
    return found


def tool_params(tool: dict[str, Any]) -> dict[str, Any]:
    schema = tool.get("inputSchema") or {}
    required = set(schema.get("required") or [])
    return {name: {"type": (prop or {}).get("type"), "enum": (prop or {}).get("enum"),
                   "required": name in required}
            for name, prop in (schema.get("properties") or {}).items()}


def _strip(name: str, service: str | None) -> str:
    prefix = f"{service}_" if service else ""
    return name[len(prefix):] if prefix and name.startswith(prefix) else name


def diff(spec: dict[str, Any], tools: list[dict[str, Any]],
         service: str | None = None) -> dict[str, list[dict[str, Any]]]:
    """operationId -> its findings (each ``{kind, detail, blocking}``); extra tools under
    ``""``."""
    ops = {_strip(k, service): (k, v) for k, v in spec_operations(spec).items()}
    live: dict[str, tuple[str, dict[str, Any]]] = {}
    findings: dict[str, list[dict[str, Any]]] = {k: [] for k, _ in ops.values()}
    findings[""] = []

    def add(where: str, kind: str, detail: str) -> None:
        findings[where].append({"kind": kind, "detail": detail, "blocking": kind in BLOCKING})

    for tool in tools:
        key = _strip(str(tool.get("name")), service)
        if key in live:
            add(ops[key][0] if key in ops else "", "ambiguous_tool",
                f"tools {live[key][0]!r} and {tool.get('name')!r} both read as {key!r}")
        live[key] = (str(tool.get("name")), tool_params(tool))
    for key, (op_id, params) in ops.items():
        if key not in live:
            add(op_id, "missing_tool", f"no tool serves operation {op_id!r}")
            continue
        name, args = live[key]
        for param, want in params.items():
            have = args.get(param)
            if have is None:
                add(op_id, "missing_param", f"{name}: no argument {param!r}")
                continue
            if want["type"] and have["type"] and want["type"] != have["type"]:
                add(op_id, "type_mismatch", f"{name}.{param}: the spec says {want['type']}, "
                    f"the tool {have['type']}")
            if want["enum"] and sorted(map(str, want["enum"])) != sorted(map(str, have["enum"]
                                                                             or [])):
                add(op_id, "enum_mismatch", f"{name}.{param}: the spec allows {want['enum']}, "
                    f"the tool {have['enum']}")
            if want["required"] != have["required"]:
                add(op_id, "required_mismatch", f"{name}.{param}: required in "
                    f"{'the spec' if want['required'] else 'the tool'} only")
        for param, have in args.items():
            if param not in params:
                add(op_id, "extra_required_param" if have["required"] else "extra_param",
                    f"{name}: argument {param!r} is not in the spec")
    for key, (name, _) in live.items():
        if key not in ops:
            add("", "extra_tool", f"tool {name!r} is not in the spec")
    return findings


def _parse_spec(data: bytes, where: str) -> dict[str, Any]:
    import yaml

    try:
        spec = yaml.safe_load(data.decode())
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise StepError(f"{where} is not JSON or YAML: {str(exc).splitlines()[0]}") from None
    if not isinstance(spec, dict) or not isinstance(spec.get("paths"), dict):
        raise StepError(f"{where} is not an OpenAPI spec (it has no 'paths' object)")
    return spec


@attrs.define(kw_only=True)
class VerifySpecConformance(Step):
    """Diff an OpenAPI spec against the env's tools (see the module)."""

    type = "verify_spec_conformance"
    example = {
        'id': 'spec',
        'type': 'verify_spec_conformance',
        'env_id': 'notes',
        'spec_artifact_id': 'notes-openapi',
        'service': 'notes',
    }
    entity_fields = {"env_id": "envs", "spec_artifact_id": "artifacts"}

    env_id: str
    spec_artifact_id: str | None = None
    service: str | None = None
    verifier_id: str | None = None
    timeout_seconds: float = 30

    async def _specs(self, ctx: TaskContext, env: Any) -> list[tuple[str, dict[str, Any]]]:
        import aiohttp

        if self.spec_artifact_id is not None:
            artifact = await ctx.artifact(self.spec_artifact_id)
            if len(artifact.files) != 1:
                raise StepError(f"spec_artifact_id '{self.spec_artifact_id}' must hold one "
                                f"file, the spec (it holds {len(artifact.files)})")
            return [(self.spec_artifact_id,
                     _parse_spec(artifact.files[0].data, f"artifact {self.spec_artifact_id}"))]
        from agentenv_protocol.client import fetch_card_raw

        card = await fetch_card_raw(env.url, headers=env.headers, timeout=self.timeout_seconds)
        found = []
        async with aiohttp.ClientSession(headers=env.headers) as http:
            for child in card.get("children_environments") or []:
                for path in _SPEC_PATHS:
                    url = f"{env.url}/env/{child.get('name')}{path}"
                    async with http.get(url, timeout=aiohttp.ClientTimeout(
                            total=self.timeout_seconds)) as resp:
                        if resp.status == 200:
                            found.append((f"{child.get('name')}{path}",
                                          _parse_spec(await resp.read(), url)))
                            break
        return found

    async def run(self, ctx: TaskContext) -> None:
        from agentenv_mcp_env.steps import deployment
        from agentenv_protocol.client import McpClient

        env = deployment(ctx, self.env_id)
        specs = await self._specs(ctx, env)
        if not specs:
            ctx.outputs[self.id] = {"skipped": True, "reason": "no server serves /openapi.yaml, "
                                    "and the step names no spec_artifact_id"}
            ctx.note(f"{self.type}: not scored, no spec to compare with")
            return
        async with McpClient(f"{env.url}/mcp", headers=env.headers,
                             timeout=self.timeout_seconds) as client:
            tools = [{"name": t.name, "inputSchema": t.input_schema}
                     for t in await client.list_tools()]
        rows: list[ScoreRow] = []
        report: dict[str, Any] = {}
        for source, spec in specs:
            for op_id, found in diff(spec, tools, self.service).items():
                report[op_id or "(extra tools)"] = found
                if not op_id:
                    continue
                blocking = [f["detail"] for f in found if f["blocking"]]
                rows.append(ScoreRow(len(rows), 0.0 if blocking else 1.0, not blocking,
                                     "; ".join(blocking[:3]) or "conforms"
                                     + (f" ({len(found)} note(s))" if found else ""),
                                     criterion={"id": op_id, "spec": source}))
        ctx.outputs[self.id] = {"passed": all(r.result for r in rows), "findings": report,
                                "spec_operations": len(rows), "total_tools": len(tools)}
        if rows:
            ctx.record_verification(self, self.verifier_id, rows, "all_pass")


@attrs.define(kw_only=True)
class VerifyMcpEnvAssessment(Step):
    """Grade an agent's JSON report on the env's tools (see the module)."""

    type = "verify_mcp_env_assessment"
    example = {
        'id': 'assessment',
        'type': 'verify_mcp_env_assessment',
        'env_id': 'notes',
        'prompt_id': 'assess',
    }
    entity_fields = {"env_id": "envs"}

    env_id: str
    prompt_id: str
    verifier_id: str | None = None

    def check(self, view: PreflightView) -> list[str]:
        problems = super().check(view)
        if self.prompt_id not in view.step_ids:
            problems.append(f"prompt_id '{self.prompt_id}' is no step of this task (name the "
                            "prompt_agent whose reply is the assessment)")
        return problems

    async def run(self, ctx: TaskContext) -> None:
        ctx.env(self.env_id)  # deployed, or the error naming it
        reply = find_reply(ctx, self.prompt_id)
        if reply is None:
            raise StepError(f"no reply to prompt '{self.prompt_id}' is recorded")
        results: list[Any] = []
        problem = None
        if reply.get("error_type"):
            problem = f"the agent failed the prompt ({reply['error_type']})"
        else:
            text = str(reply.get("response") or "").strip()
            if text.startswith("```"):  # a fenced block around the JSON
                text = text.strip("`").removeprefix("json").strip()
            try:
                parsed = json.loads(text)
                results = parsed.get("results") if isinstance(parsed, dict) else None
            except ValueError as exc:
                problem = f"the reply is not JSON: {exc}"
            if problem is None and (not isinstance(results, list) or not results):
                problem = 'the reply lists no {"results": [{"tool", "passed"}]}'
        rows = [ScoreRow(0, 0.0, False, str(problem), criterion={"id": "assessment"})] \
            if problem else [
            ScoreRow(i, 1.0 if r.get("passed") is True else 0.0, r.get("passed") is True,
                     str(r.get("reason") or r.get("detail") or ""),
                     criterion={"id": str(r.get("tool") or f"result-{i}")})
            for i, r in enumerate(r if isinstance(r, dict) else {} for r in results)]
        ctx.outputs[self.id] = {"passed": all(r.result for r in rows),
                                "total_tools": 0 if problem else len(rows),
                                "results": results, **({"error": problem} if problem else {})}
        ctx.record_verification(self, self.verifier_id, rows, "all_pass")
