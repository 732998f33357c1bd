"""Environment artifacts and universes in a bundle: what artifact.toml may say, how a universe's
folder reads, and environment_artifacts naming the bundle's own environment artifacts."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_env.bundles.parse import parse_bundle
from agent_env.tasks.artifacts import ArtifactContent, ArtifactFile, universe_layout


def bundle(root: Path, artifacts: dict[str, str]) -> Path:
    for path, text in artifacts.items():
        target = root / "artifacts" / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    return root


def parsed(root: Path) -> list:
    found, problems = parse_bundle(root, "@local/b")
    assert problems == []
    return list(found.artifacts)


def refusal(root: Path) -> str:
    _, problems = parse_bundle(root, "@local/b")
    assert problems, "nothing was refused"
    return "; ".join(problems)


def test_an_environment_artifact_keeps_its_name_and_one_file(tmp_path: Path) -> None:
    root = bundle(tmp_path, {
        "inbox/artifact.toml": 'type = "environment"\nenvironment_name = "mail"\n'
                               'description = "three messages"\n',
        "inbox/inbox.json": "[]",
    })
    (entry,) = parsed(root)
    assert (entry.type, entry.environment_name, [f.path for f in entry.files]) == (
        "environment", "mail", ["inbox.json"])


@pytest.mark.parametrize("toml, files, said", [
    ('type = "environment"\n', {"a.json": "1"}, "environment_name is required"),
    ('type = "environment"\nenvironment_name = "  "\n', {"a.json": "1"},
     "environment_name is required"),
    ('type = "environment"\nenvironment_name = "m"\n', {"a.json": "1", "b.json": "2"},
     "holds one file besides artifact.toml, and has 2"),
    ('type = "environment"\nenvironment_name = "m"\nfile = "other"\n', {},
     "file (wrapping another artifact's file) is not supported here"),
    ('type = "environment"\nenvironment_name = "m"\nservice = "x"\n', {"a.json": "1"},
     "unknown key(s) service"),
    ('type = "environment_universe"\n', {"top.json": "1"},
     "top.json: a universe holds a folder per environment"),
    ('type = "environment_universe"\n', {"mail/a.json": "1", "mail/b.json": "2"},
     "mail/: holds one file, and has 2 (a.json, b.json)"),
    ('type = "environment_universe"\n', {"metadata/x.json": "1"},
     "metadata/ holds a folder per key"),
    ('type = "environment_universe"\n', {}, "a universe needs at least one environment"),
    ('type = "environment_universe"\nenvironment_artifacts = "mail"\n', {"mail/a.json": "1"},
     "environment_artifacts must be a list"),
])
def test_bad_environment_artifacts_are_refused_by_name(tmp_path: Path, toml: str,
                                                       files: dict[str, str], said: str) -> None:
    root = bundle(tmp_path, {"data/artifact.toml": toml,
                             **{f"data/{k}": v for k, v in files.items()}})
    assert said in refusal(root)


def test_a_universe_reads_a_folder_per_environment_and_its_metadata(tmp_path: Path) -> None:
    root = bundle(tmp_path, {
        "world/artifact.toml": 'type = "environment_universe"\n',
        "world/mail/inbox.json": "[]",
        "world/team/chat/log.json": "{}",
        "world/metadata/readme/README.md": "hi",
    })
    (entry,) = parsed(root)
    layout, problems = universe_layout(f.path for f in entry.files)
    assert problems == []
    assert layout.environments == {"mail": "mail/inbox.json", "team/chat": "team/chat/log.json"}
    assert layout.metadata == {"readme": "metadata/readme/README.md"}


def test_environment_artifacts_join_the_universe_under_their_names(tmp_path: Path) -> None:
    root = bundle(tmp_path, {
        "inbox/artifact.toml": 'type = "environment"\nenvironment_name = "mail"\n',
        "inbox/inbox.json": "[1]",
        "world/artifact.toml": 'type = "environment_universe"\n'
                               'environment_artifacts = ["inbox"]\n',
        "world/chat/log.json": "{}",
    })
    world = {a.name: a for a in parsed(root)}["world"]
    assert [f.path for f in world.files] == ["chat/log.json", "mail/inbox.json"]


@pytest.mark.parametrize("named, said", [
    ('["nothing"]', "names 'nothing', which is no environment artifact of this bundle"),
    ('["inbox"]', "two of its environments are named 'mail'"),
])
def test_environment_artifacts_that_do_not_fit_are_refused(tmp_path: Path, named: str,
                                                           said: str) -> None:
    root = bundle(tmp_path, {
        "inbox/artifact.toml": 'type = "environment"\nenvironment_name = "mail"\n',
        "inbox/inbox.json": "[1]",
        "world/artifact.toml": f'type = "environment_universe"\nenvironment_artifacts = {named}\n',
        "world/mail/other.json": "{}",
    })
    assert said in refusal(root)


def test_content_names_its_environments() -> None:
    one = ArtifactFile("inbox.json", b"[]")
    assert ArtifactContent("a", 1, "environment", (one,), "mail").environments() == {
        "mail": one}
    universe = ArtifactContent("u", 2, "environment_universe", (
        ArtifactFile("mail/inbox.json", b"[]"), ArtifactFile("metadata/k/x.txt", b"x")))
    assert list(universe.environments()) == ["mail"]
    assert ArtifactContent("f", 1, "file", (one,)).environments() == {}
