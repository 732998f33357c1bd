"""skill-config/v1 on an SDK agent served on loopback: SKILL.md inline, and a bundle of files
read through boto3 presigned GET URLs on moto's S3; what a turn sees, and every refusal leaving
no skill behind."""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from agent_env.stores.filesystem import FilesystemObjectStore
from agent_env.tasks.steps import PreflightView, StepError, structure_step
from agentenv_agents.a2a_type import post_ok
from agentenv_agents.skill_config import give_skills
from agentenv_agents.steps import DeployAgent
from agentenv_aws_stores.s3 import S3ObjectStore
from agentenv_protocol.agent import (
    SKILL_CONFIG_V1,
    AgentConfig,
    AgentEnvAgent,
    AgentIdentity,
    TaskRequest,
    TaskResult,
    a2a_agent,
    create_app,
)
from agentenv_protocol.testing import RunningServer, serve_app

SOON = (dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)).isoformat()


@a2a_agent(identity=AgentIdentity(name="skilled", description="Lists the skills it was given."),
           extensions=("skill-config",))
class SkilledAgent(AgentEnvAgent):
    async def run(self, request: TaskRequest[AgentConfig]) -> TaskResult:
        lines = [f"{name}: {sorted(skill.files)} {skill.skill_md.splitlines()[0]}"
                 for name, skill in sorted(request.skills.items())]
        return TaskResult(text="\n".join(lines) or "no skills")


@pytest.fixture
async def agent() -> AsyncIterator[RunningServer]:
    async with serve_app(create_app(SkilledAgent())) as server:
        yield server


def _object(s3_store: S3ObjectStore, key: str, data: bytes, **extra: Any) -> dict[str, Any]:
    s3_store.put(key, data, allow_overwrite=True)
    return {"media_type": "application/octet-stream", "max_bytes": 1 << 20,
            "size_bytes": len(data), "sha256": hashlib.sha256(data).hexdigest(),
            "read": {"kind": "http_get", "url": s3_store.signed_get_url(key),
                     "expires_at": SOON}, **extra}


async def _add(http: aiohttp.ClientSession, url: str, body: dict[str, Any]) -> tuple[int, Any]:
    async with http.post(url + "/ext/skill-config", json=body) as resp:
        return resp.status, await resp.json()


async def _turn(http: aiohttp.ClientSession, url: str) -> str:
    body = {"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {
        "message": {"messageId": "m1", "role": "user", "kind": "message",
                    "parts": [{"kind": "text", "text": "go"}]},
        "configuration": {"blocking": True}}}
    async with http.post(url + "/a2a", json=body) as resp:
        result = (await resp.json())["result"]
    return str(result["status"]["message"]["parts"][0]["text"])


async def test_inline_and_bundle_skills_reach_the_turn(agent: RunningServer,
                                                      s3_store: S3ObjectStore) -> None:
    async with aiohttp.ClientSession() as http:
        async with http.get(agent.url + "/.well-known/agent-card.json") as resp:
            card = await resp.json()
        entry = next(e for e in card["capabilities"]["extensions"]
                     if e["uri"] == SKILL_CONFIG_V1)
        assert entry["params"]["objects"] == ["skill_bundle"]
        assert await _add(http, agent.url, {"name": "notes", "description": "take notes",
                                            "skill_md": "# Notes\nwrite them down"}) == (
            200, {"name": "notes"})
        bundle = {"max_total_bytes": 4096, "files": [
            {"path": "SKILL.md", "object": _object(s3_store, "s/SKILL.md", b"# Sums\nadd up")},
            {"path": "scripts/add.py", "object": _object(s3_store, "s/add.py", b"print(1+1)")}]}
        assert await _add(http, agent.url, {"name": "sums", "description": "arithmetic",
                                            "skill_bundle": bundle}) == (200, {"name": "sums"})
        async with http.get(agent.url + "/ext/skill-config") as resp:
            listing = await resp.json()
        assert listing["skills"]["sums"] == {"description": "arithmetic",
                                             "files": ["SKILL.md", "scripts/add.py"]}
        assert await _turn(http, agent.url) == (
            "notes: ['SKILL.md'] # Notes\nsums: ['SKILL.md', 'scripts/add.py'] # Sums")


async def test_refusals_add_nothing(agent: RunningServer, s3_store: S3ObjectStore) -> None:
    skill = _object(s3_store, "r/SKILL.md", b"# R\n" + b"x" * 200)
    other = _object(s3_store, "r/o.txt", b"other")

    def bundle(*files: tuple[str, Any], total: int = 4096) -> dict[str, Any]:
        return {"name": "r", "description": "d", "skill_bundle": {
            "max_total_bytes": total, "files": [{"path": p, "object": o} for p, o in files]}}

    expired = {**skill, "read": {**skill["read"], "expires_at": "2020-01-01T00:00:00Z"}}
    wrong_digest = {**skill, "sha256": "0" * 64}
    cases: list[tuple[dict[str, Any], int, str]] = [
        ({"name": "-bad", "description": "d", "skill_md": "x"}, 400, "invalid_params"),
        ({"name": "r", "description": "d"}, 400, "invalid_params"),
        ({"name": "r", "description": "d", "skill_md": "x", "skill_bundle": {}}, 400,
         "invalid_params"),
        (bundle(("../SKILL.md", skill)), 400, "invalid_params"),
        (bundle(("/etc/SKILL.md", skill)), 400, "invalid_params"),
        (bundle(("o.txt", other)), 400, "invalid_params"),  # no SKILL.md
        (bundle(("SKILL.md", skill), ("SKILL.md", skill)), 400, "invalid_params"),
        (bundle(("SKILL.md", expired)), 410, "grant_expired"),
        (bundle(("SKILL.md", wrong_digest)), 422, "integrity_mismatch"),
        (bundle(("SKILL.md", skill), ("o.txt", other), total=206), 413, "transfer_too_large"),
        (bundle(("SKILL.md", {"media_type": "text/plain"})), 400, "invalid_transfer"),
    ]
    async with aiohttp.ClientSession() as http:
        for body, status, code in cases:
            got_status, got = await _add(http, agent.url, body)
            assert (got_status, got["error"]["code"]) == (status, code), body
        async with http.get(agent.url + "/ext/skill-config") as resp:
            assert (await resp.json()) == {"skills": {}}
        assert (await _add(http, agent.url, bundle(("SKILL.md", skill))))[0] == 200
        status, body = await _add(http, agent.url, bundle(("SKILL.md", skill)))
        assert (status, body["error"]["code"]) == (409, "conflict")


# -- the runtime's side: deploy_agent's skills ---------------------------------------------------


async def _give(agent: RunningServer, card: dict[str, Any], entries: list[dict[str, Any]],
                s3_store: Any, *, open_agent: bool = True,
                stored: dict[str, dict[str, bytes]] | None = None) -> list[str]:
    async def load(artifact_id: str) -> dict[str, bytes]:
        return (stored or {})[artifact_id]

    async with aiohttp.ClientSession() as http:
        return await give_skills(http, agent.url, "skilled", card, entries, load=load,
                                 post=post_ok, store=s3_store, open_agent=open_agent,
                                 staging_prefix="staging/skills")


async def _card(agent: RunningServer) -> dict[str, Any]:
    async with aiohttp.ClientSession() as http, \
            http.get(agent.url + "/.well-known/agent-card.json") as resp:
        return dict(await resp.json())


async def test_deploy_agent_skills_inline_and_by_grant(agent: RunningServer,
                                                      s3_store: S3ObjectStore) -> None:
    stored = {"skills/sums": {"SKILL.md": b"# Sums\nadd up", "scripts/add.py": b"print(2)"},
              "skills/notes": {"SKILL.md": b"# Notes only"}}
    names = await _give(agent, await _card(agent), [
        {"name": "inline", "description": "d", "skill_md": "# Inline\nx"},
        {"artifact_id": "skills/sums", "description": "arithmetic"},
        {"artifact_id": "skills/notes"}], s3_store, stored=stored)
    assert names == ["inline", "sums", "notes"]
    assert s3_store.list("staging/") == []  # staged copies removed once the agent had them
    async with aiohttp.ClientSession() as http:
        assert await _turn(http, agent.url) == (
            "inline: ['SKILL.md'] # Inline\nnotes: ['SKILL.md'] # Notes only\n"
            "sums: ['SKILL.md', 'scripts/add.py'] # Sums")


async def test_deploy_agent_skills_refused_by_name(agent: RunningServer, s3_store: S3ObjectStore,
                                                   tmp_path: Path) -> None:
    card = await _card(agent)
    several = {"skills/sums": {"SKILL.md": b"# Sums", "add.py": b"1"}}
    with pytest.raises(StepError, match=r"sealed and cannot reach the object store.*open"):
        await _give(agent, card, [{"artifact_id": "skills/sums"}], s3_store, open_agent=False,
                    stored=several)
    with pytest.raises(StepError, match="cannot sign URLs"):
        await _give(agent, card, [{"artifact_id": "skills/sums"}],
                    FilesystemObjectStore(tmp_path), stored=several)
    no_ext = {**card, "capabilities": {**card["capabilities"], "extensions": []}}
    with pytest.raises(StepError, match="takes no skills"):
        await _give(agent, no_ext, [{"name": "a", "skill_md": "x"}], s3_store)
    with pytest.raises(StepError, match=r"holds no SKILL\.md"):
        await _give(agent, card, [{"artifact_id": "x"}], s3_store, stored={"x": {"a.txt": b"1"}})
    with pytest.raises(StepError, match=r"skill-config answered HTTP 400"):
        await _give(agent, card, [{"name": "b", "skill_md": 3}], s3_store)
    assert s3_store.list("staging/") == []


def test_deploy_agent_checks_its_skills_before_anything_runs() -> None:
    view = PreflightView(step_ids=frozenset({"agent"}),
                         entities={"artifacts": frozenset({"skills/b", "s/a"})})

    def problems(skills: Any) -> list[str]:
        return structure_step(DeployAgent, {"id": "agent", "skills": skills}).check(view)

    assert problems([{"name": "a", "description": "d", "skill_md": "# A"},
                     {"artifact_id": "skills/b"}]) == []
    assert problems([{"name": "a"}]) == ["skills[0] needs exactly one of skill_md or artifact_id"]
    assert problems([{"skill_md": "x"}]) == ["skills[0] needs a name"]
    assert problems([{"name": "-x", "skill_md": "x"}])[0].startswith("skills[0]: name must match")
    assert problems([{"name": "a", "skill_md": "x"}, {"artifact_id": "s/a"}]) == [
        "skills[1]: a skill named 'a' is given twice"]
    assert problems([{"name": "a", "skill_md": "x", "url": "u"}]) == [
        "skills[0]: unknown key(s) url"]
    # a skill artifact is an entity like any other: one the run cannot load is a problem
    assert problems([{"artifact_id": "nowhere"}]) == [
        "skills[].artifact_id 'nowhere' names no artifact in this bundle"]
