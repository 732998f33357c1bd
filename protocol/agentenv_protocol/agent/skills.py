"""skill-config/v1: skills the runtime gives an agent, inline or through object grants.

A skill is a folder whose ``SKILL.md`` says what it is for (and the files beside it: scripts,
references). The runtime adds one with ``POST /ext/skill-config``:

- inline: ``{name, description, skill_md}``, the ``SKILL.md`` text alone;
- object form: ``{name, description, skill_bundle: {max_total_bytes, files: [{path, object:
  ReadObject}]}}``, each file read through its grant (:mod:`..transfer`: size and sha256
  checked, redirects refused), for skills with more than one file or too big to send inline.

Either answers ``{name}``; ``GET /ext/skill-config`` lists ``{skills: {name: {description,
files}}}``. The skills a run sees are ``request.skills`` (name -> :class:`Skill`), fixed when its
turn starts. A bad request adds nothing: a name outside ``[A-Za-z0-9][A-Za-z0-9._-]{0,127}``, a
name already added (409), both or neither form, a path that is absolute, climbs out (``..``) or
repeats, a bundle without ``SKILL.md``, more than ``max_total_bytes`` in all (413), and every
transfer refusal with its own code and status.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from ..transfer import TransferError, inside_path, read_object, read_object_from_wire
from .extensions import bad_request as _bad

SKILL_CONFIG_V1 = "urn:agentenv:skill-config/v1"
SKILL_PATH = "/ext/skill-config"
SKILL_FILE = "SKILL.md"
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
#: The most files one bundle may hold, and the largest ``max_total_bytes`` taken.
MAX_FILES = 1000
MAX_TOTAL_BYTES = 256 * 1024 * 1024


@attrs.frozen
class Skill:
    """One skill: its files by relative path (``SKILL.md`` always among them)."""

    name: str
    description: str
    files: Mapping[str, bytes]
    #: added inline (``skill_md``), not as a bundle of objects
    inline: bool = False

    @property
    def skill_md(self) -> str:
        return self.files[SKILL_FILE].decode("utf-8", "replace")


def write_skills(skills: Mapping[str, Skill], root: Path) -> None:
    """Lay each skill out as ``<root>/<name>/<path>``: where a CLI agent looks for skills
    (Claude Code's ``~/.claude/skills``, Gemini CLI's ``~/.gemini/skills``). Every path was
    kept inside its skill when the skill was added."""
    for name, skill in skills.items():
        folder = root / name
        for path, data in skill.files.items():
            target = folder / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)


def _path(raw: Any) -> str:
    if not isinstance(raw, str) or not raw or "\\" in raw or "\x00" in raw:
        raise _bad(f"a bundle file's path must be a relative path, got {raw!r}")
    if not inside_path(raw):
        raise _bad(f"a bundle file's path must stay inside the skill: {raw!r}")
    return raw


class SkillState:
    """The skills the runtime added, by name."""

    def __init__(self) -> None:
        self.skills: dict[str, Skill] = {}

    async def add(self, body: Any, added: Any = None) -> Skill:
        """Read the skill ``body`` describes and keep it; ``added`` (the agent's
        ``skill_added``) is awaited with it first, and what it raises adds nothing."""
        if not isinstance(body, Mapping):
            raise _bad("body must be a JSON object")
        unknown = sorted(set(body) - {"name", "description", "skill_md", "skill_bundle"})
        if unknown:
            raise _bad(f"unknown field(s): {', '.join(unknown)}")
        name, description = body.get("name"), body.get("description")
        if not isinstance(name, str) or not NAME.match(name):
            raise _bad(f"name must match {NAME.pattern}, got {name!r}")
        if not isinstance(description, str):
            raise _bad("description must be a string")
        if name in self.skills:
            raise _bad(f"a skill named {name!r} is already added", code="conflict", status=409)
        inline, bundle = body.get("skill_md"), body.get("skill_bundle")
        if (inline is None) == (bundle is None):
            raise _bad("give exactly one of skill_md (inline) or skill_bundle (objects)")
        if inline is not None:
            if not isinstance(inline, str):
                raise _bad("skill_md must be a string")
            files = {SKILL_FILE: inline.encode("utf-8", "surrogatepass")}
        else:
            files = await _read_bundle(bundle)
        if name in self.skills:  # added by a request that finished while this one read
            raise _bad(f"a skill named {name!r} is already added", code="conflict", status=409)
        skill = Skill(name, description, files, inline=inline is not None)
        if added is not None:
            await added(skill)
        if name in self.skills:
            raise _bad(f"a skill named {name!r} is already added", code="conflict", status=409)
        self.skills[name] = skill
        return skill

    def listing(self) -> dict[str, Any]:
        return {"skills": {n: {"description": s.description, "files": sorted(s.files)}
                           for n, s in self.skills.items()}}

    def snapshot(self) -> dict[str, Skill]:
        return dict(self.skills)

    @staticmethod
    def card_entry() -> dict[str, Any]:
        return {
            "uri": SKILL_CONFIG_V1,
            "description": "Give the agent skills: SKILL.md inline, or a bundle of files "
                           "read through object grants.",
            "params": {
                "endpoint": SKILL_PATH,
                "objects": ["skill_bundle"],
                "methods": {
                    "add": {"method": "POST", "endpoint": SKILL_PATH,
                            "request": {"oneOf": [
                                {"required": ["name", "description", "skill_md"]},
                                {"required": ["name", "description", "skill_bundle"]}]},
                            "response": {"name": "string"}},
                    "list": {"method": "GET", "endpoint": SKILL_PATH,
                             "response": {"skills": "object"}},
                },
            },
        }


async def _read_bundle(bundle: Any) -> dict[str, bytes]:
    """Every file of a bundle, each through its grant, within ``max_total_bytes``."""
    if not isinstance(bundle, Mapping):
        raise _bad("skill_bundle must be an object")
    limit, entries = bundle.get("max_total_bytes"), bundle.get("files")
    if isinstance(limit, bool) or not isinstance(limit, int) or not 0 < limit <= MAX_TOTAL_BYTES:
        raise _bad(f"skill_bundle.max_total_bytes must be 1..{MAX_TOTAL_BYTES}")
    if not isinstance(entries, list) or not entries or len(entries) > MAX_FILES:
        raise _bad(f"skill_bundle.files must list 1..{MAX_FILES} files")
    wanted: list[tuple[str, Any]] = []
    for entry in entries:
        if not isinstance(entry, Mapping) or set(entry) != {"path", "object"}:
            raise _bad("each bundle file is {path, object}")
        path = _path(entry["path"])
        if any(path == seen for seen, _ in wanted):
            raise _bad(f"the bundle names {path!r} twice")
        wanted.append((path, read_object_from_wire(entry["object"])))
    if SKILL_FILE not in {path for path, _ in wanted}:
        raise _bad(f"a skill bundle holds a {SKILL_FILE}")
    files: dict[str, bytes] = {}
    left = limit
    for path, obj in wanted:
        # never read more than the bundle has left: a file over it stops at that many bytes
        capped = attrs.evolve(obj, max_bytes=min(obj.max_bytes, left))
        try:
            data = await read_object(capped)
        except TransferError as exc:
            if exc.code == "transfer_too_large" and capped.max_bytes < obj.max_bytes:
                raise TransferError("transfer_too_large",
                                    f"the bundle is larger than max_total_bytes ({limit})") \
                    from None
            raise TransferError(exc.code, f"{path}: {exc.message}",
                                retryable=exc.retryable) from None
        files[path] = data
        left -= len(data)
    return files
