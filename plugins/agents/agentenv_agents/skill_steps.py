"""``add_skills``: give a deployed agent more skills mid-task (skill-config/v1).

The reference's keys: ``skills`` (each inline, ``name`` + ``description`` + ``body`` and the
front matter ``license``, ``compatibility``, ``metadata``, ``allowed_tools``, rendered as its
SKILL.md; or a stored skill, ``skill_artifact_id`` with ``skill_artifact_version``; our
``deploy_agent`` shapes, ``skill_md`` or ``artifact_id``, work too), ``cli_artifact_ids`` (CLIs
an earlier ``load_artifact`` installed into this agent: each becomes a skill saying where it is
and how to discover it) and ``file_artifact_universe_ids`` (artifacts loaded into it: a skill
saying where the files are). ``object_url`` skills are refused: skills are stored artifacts
here.
"""

from __future__ import annotations

import hashlib
import re
from typing import TYPE_CHECKING, Any

import attrs

from agent_env.api import DEFAULT_AGENT_NAME, PreflightView, Step, StepError

if TYPE_CHECKING:
    from agent_env.api import TaskContext

_REFERENCE_KEYS = {"name", "description", "body", "license", "compatibility", "metadata",
                   "allowed_tools", "skill_artifact_id", "skill_artifact_version"}
_OUR_KEYS = {"name", "description", "skill_md", "artifact_id"}


def skill_md(entry: dict[str, Any]) -> str:
    """An inline skill's SKILL.md: its front matter, then its body."""
    lines = ["---", f"name: {entry['name']}", f"description: {entry['description']}"]
    for key, label in (("license", "license"), ("compatibility", "compatibility")):
        if entry.get(key):
            lines.append(f"{label}: {entry[key]}")
    if entry.get("metadata"):
        lines.append("metadata:")
        lines += [f'  {k}: "{v}"' for k, v in dict(entry["metadata"]).items()]
    if entry.get("allowed_tools"):
        lines.append(f"allowed-tools: {entry['allowed_tools']}")
    lines.append("---")
    if entry.get("body"):
        lines += ["", str(entry["body"])]
    return "\n".join(lines) + "\n"


def _written(name: str, description: str, body: str) -> dict[str, Any]:
    """A skill this step writes itself (for a CLI or files it points the agent at): one
    name and description, in the entry and in its SKILL.md alike."""
    return {"name": name, "description": description,
            "skill_md": skill_md({"name": name, "description": description, "body": body})}


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:45].rstrip("-")


@attrs.define(kw_only=True)
class AddSkills(Step):
    """Give a deployed agent more skills: inline ones, stored ones, and skills that point it at
    the CLIs and files earlier ``load_artifact`` steps put in its container (see the module)."""

    type = "add_skills"
    example = {
        'id': 'skills',
        'type': 'add_skills',
        'agent_name': 'agent',
        'skills': [{
            'name': 'tone',
            'description': 'How to sound.',
            'skill_md': '---\nname: tone\ndescription: How to sound.\n---\nBe brief.\n',
        }],
    }
    entity_fields = {"skills[].skill_artifact_id": "artifacts",
                     "skills[].artifact_id": "artifacts", "cli_artifact_ids": "artifacts",
                     "file_artifact_universe_ids": "artifacts"}

    skills: list[dict[str, Any]] = attrs.field(factory=list)
    #: CLI artifacts a ``load_artifact`` installed into this agent.
    cli_artifact_ids: list[str] = attrs.field(factory=list)
    #: Artifacts a ``load_artifact`` loaded into this agent's container.
    file_artifact_universe_ids: list[str] = attrs.field(factory=list)
    agent_name: str = DEFAULT_AGENT_NAME

    def check(self, view: PreflightView) -> list[str]:
        problems = super().check(view)
        if not (self.skills or self.cli_artifact_ids or self.file_artifact_universe_ids):
            problems.append("names no skill (give skills, cli_artifact_ids or "
                            "file_artifact_universe_ids)")
        for i, entry in enumerate(self.skills if isinstance(self.skills, list) else []):
            where = f"skills[{i}]"
            if not isinstance(entry, dict):
                problems.append(f"{where} must be an object")
                continue
            if "object_url" in entry or "s3_url" in entry:
                problems.append(f"{where}: object_url is not supported here: skills are stored "
                                "artifacts (skill_artifact_id)")
                continue
            unknown = sorted(set(entry) - _REFERENCE_KEYS - _OUR_KEYS)
            if unknown:
                problems.append(f"{where}: unknown key(s) {', '.join(unknown)}")
            stored = "skill_artifact_id" in entry or "artifact_id" in entry
            inline = "body" in entry or "skill_md" in entry
            if stored == inline:
                problems.append(f"{where} needs exactly one source: body (or skill_md) inline, "
                                "or skill_artifact_id")
            elif inline and not (entry.get("name") and entry.get("description")):
                problems.append(f"{where}: an inline skill needs a name and a description")
        return problems

    def _entries(self, ctx: TaskContext) -> tuple[list[dict[str, Any]], dict[str, int]]:
        """What the agent is given (skill-config entries), and the stored skills' versions."""
        entries: list[dict[str, Any]] = []
        versions: dict[str, int] = {}
        for entry in self.skills:
            stored = entry.get("skill_artifact_id", entry.get("artifact_id"))
            if stored is not None:
                if entry.get("skill_artifact_version") is not None:
                    versions[str(stored)] = int(entry["skill_artifact_version"])
                entries.append({"artifact_id": str(stored),
                                **({"name": entry["name"]} if entry.get("name") else {}),
                                **({"description": entry["description"]}
                                   if entry.get("description") else {})})
            else:
                entries.append({"name": entry["name"], "description": entry["description"],
                                "skill_md": entry.get("skill_md") or skill_md(entry)})
        loads = [o for o in ctx.outputs.values()
                 if isinstance(o, dict) and o.get("agent_name") == self.agent_name]
        clis = {k: v for o in loads for k, v in (o.get("installed_clis") or {}).items()}
        placed = {k: v for o in loads for k, v in (o.get("artifacts") or {}).items()}
        for artifact_id in self.cli_artifact_ids:
            cli = clis.get(artifact_id)
            if cli is None:
                raise StepError(f"cli artifact '{artifact_id}' was not installed into agent "
                                f"'{self.agent_name}' (a load_artifact step with agent_name "
                                f"'{self.agent_name}' must install it first)")
            command, path = cli["command_name"], cli["install_path"]
            entries.append(_written(
                f"{_slug(command) or 'tool'}-cli",
                f"Use when working with the {command} environment. Run {path} --help to "
                "discover its subcommands.",
                f"# {command} CLI\n\nInstalled at `{path}`. Run `{path} --help` for its "
                f"subcommands, `{path} <subcommand> --help` for their flags."))
        for artifact_id in self.file_artifact_universe_ids:
            where = placed.get(artifact_id)
            if where is None:
                raise StepError(f"artifact '{artifact_id}' was not loaded into agent "
                                f"'{self.agent_name}' (a load_artifact step with agent_name "
                                f"'{self.agent_name}' must load it first)")
            digest = hashlib.sha256(artifact_id.encode()).hexdigest()[:12]
            name = f"{_slug(artifact_id.rsplit('/', 1)[-1])}-{digest}-files".lstrip("-")
            said = f"Files possibly relevant to the current task are available at {where}."
            entries.append(_written(name, said, said))
        return entries, versions

    async def run(self, ctx: TaskContext) -> None:
        give = getattr(ctx.agent(self.agent_name), "give_skills", None)
        if give is None:
            raise StepError(f"agent '{self.agent_name}' takes no skills here (it is not an "
                            "A2A agent with skill-config/v1)")
        entries, versions = self._entries(ctx)
        names = await give(entries, versions)
        ctx.outputs[self.id] = {"agent_name": self.agent_name, "skills": list(names)}
