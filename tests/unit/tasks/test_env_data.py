"""Seeding a deployed env's servers (agent_env.env_data), against ``RecordingDeployment``: a test
double standing in for an env type's deployment, which records what each server was given
(the Docker-tier test seeds real servers: tests/e2e/mcp_env/test_environment_data.py)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from agent_env.env_data import EnvDataError, LoadedEnvironments, seed_environments
from agent_env.stores.sqlite import SqliteDocumentStore
from agent_env.tasks.artifacts import ArtifactContent, ArtifactFile


class RecordingDeployment:
    """Test double: an env deployment with servers ``names``; ``fail`` names servers whose
    load raises; ``load_environment`` records (name, bytes) and how many ran at once."""

    env_id = "office"
    instance_id = "office-abc"

    def __init__(self, names: list[str], fail: set[str] | None = None) -> None:
        self.names = names
        self.fail = set(fail or ())
        self.seeded: list[tuple[str, bytes]] = []
        self.running = 0
        self.most = 0

    def environment_names(self) -> list[str]:
        return list(self.names)

    async def load_environment(self, name: str, file: ArtifactFile) -> None:
        self.running += 1
        self.most = max(self.most, self.running)
        try:
            await asyncio.sleep(0.01)
            if name in self.fail:
                raise RuntimeError("the server said no")
            self.seeded.append((name, file.data))
        finally:
            self.running -= 1


def universe(*names: str, version: int = 1) -> ArtifactContent:
    return ArtifactContent("world", version, "environment_universe",
                           tuple(ArtifactFile(f"{n}/data.json", n.encode()) for n in names))


def seed(deployment: object, artifact: ArtifactContent, loads: LoadedEnvironments | None = None,
         **kwargs: object) -> tuple[list[str], list[str]]:
    said: list[str] = []
    loaded = asyncio.run(seed_environments(deployment, artifact, progress=said.append,
                                           loads=loads, **kwargs))  # type: ignore[arg-type]
    return loaded, said


@pytest.fixture
def loads(tmp_path: Path) -> LoadedEnvironments:
    return LoadedEnvironments(SqliteDocumentStore(tmp_path / "docs.db"))


def test_each_environment_goes_to_the_server_of_its_name(loads: LoadedEnvironments) -> None:
    env = RecordingDeployment(["notes", "digest"])
    loaded, said = seed(env, universe("digest", "notes"), loads)
    assert sorted(env.seeded) == [("digest", b"digest"), ("notes", b"notes")]
    assert sorted(loaded) == ["digest", "notes"]
    assert "[1/2] loading digest ..." in said and any("notes loaded in" in s for s in said)
    assert loads.all() == []  # a finished load leaves nothing to resume


def test_a_universe_skips_names_the_env_lacks_and_says_so(loads: LoadedEnvironments) -> None:
    env = RecordingDeployment(["notes"])
    loaded, said = seed(env, universe("notes", "calendar"), loads)
    assert loaded == ["notes"]
    assert any("skipping 'calendar'" in s for s in said)


@pytest.mark.parametrize("artifact", [
    universe("calendar"),
    ArtifactContent("inbox", 1, "environment", (ArtifactFile("a.json", b"1"),), "mail"),
])
def test_data_for_no_server_of_the_env_is_an_error(artifact: ArtifactContent) -> None:
    env = RecordingDeployment(["notes", "digest"])
    with pytest.raises(EnvDataError, match="serves 'notes', 'digest': no server of that name"):
        seed(env, artifact)
    assert env.seeded == []


def test_at_most_the_cap_load_at_once() -> None:
    names = [f"s{i}" for i in range(7)]
    env = RecordingDeployment(names)
    seed(env, universe(*names), concurrency=2)
    assert len(env.seeded) == 7 and env.most == 2


def test_an_unfinished_load_resumes_where_it_stopped(loads: LoadedEnvironments) -> None:
    env = RecordingDeployment(["a", "b", "c"], fail={"b"})
    with pytest.raises(EnvDataError) as caught:
        seed(env, universe("a", "b", "c"), loads)
    assert "loading 'b' failed (b: the server said no)" in str(caught.value)
    assert "loaded 'a', 'c', which a rerun of this load skips" in str(caught.value)
    env.fail.clear()
    env.seeded.clear()
    loaded, said = seed(env, universe("a", "b", "c"), loads)
    assert loaded == ["b"] and env.seeded == [("b", b"b")]
    assert any("resuming an unfinished load: 'a', 'c' already loaded" in s for s in said)
    # finished: the next load of it seeds everything again (how an env is put back)
    env.seeded.clear()
    assert sorted(seed(env, universe("a", "b", "c"), loads)[0]) == ["a", "b", "c"]
    # another version of the universe is another load
    env.fail = {"c"}
    with pytest.raises(EnvDataError):
        seed(env, universe("a", "b", "c", version=2), loads)
    env.fail.clear()
    env.seeded.clear()
    assert sorted(seed(env, universe("a", "b", "c", version=1), loads)[0]) == ["a", "b", "c"]


def test_a_type_that_seeds_nothing_and_other_artifacts_are_refused() -> None:
    class Plain:
        env_id = "plain"
        instance_id = "plain-1"

    with pytest.raises(EnvDataError, match="env 'plain' cannot take environment data"):
        seed(Plain(), universe("a"))
    with pytest.raises(EnvDataError, match="of type 'file'; only environment and "):
        seed(RecordingDeployment(["a"]),
             ArtifactContent("f", 1, "file", (ArtifactFile("a/x", b""),)))
