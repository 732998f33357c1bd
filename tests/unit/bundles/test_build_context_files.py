"""Issue 31, class 1: what an env, image artifact or agent folder stores is what ``docker build``
would send: its ``.dockerignore`` decides, so an ignored secret never reaches the store, the
digest or the image, while dot-files the Dockerfile copies are kept."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cli_runner import cli

from agent_env.bundles.model import local_id_root
from agent_env.bundles.parse import collect_files, parse_bundle

DOCKERFILE = "FROM python:3.11-slim\nCOPY . /app/\n"


def context_folder(root: Path, ignore: str = "secret.json\nlogs/\n!logs/keep.txt\n") -> Path:
    root.mkdir(parents=True)
    files = {
        "Dockerfile": DOCKERFILE, ".dockerignore": ignore, "server.py": "print(1)\n",
        "secret.json": '{"token": "s3cr3t"}', ".npmrc": "registry=x\n",
        "logs/a.log": "x", "logs/keep.txt": "kept", ".git/HEAD": "ref", "__pycache__/x.pyc": "x",
        "conf/.env.sample": "A=1\n",
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


KEPT = [".dockerignore", ".npmrc", "Dockerfile", "conf/.env.sample", "logs/keep.txt",
        "server.py"]


def test_a_bundle_env_keeps_what_docker_sends_and_drops_what_dockerignore_lists(
        tmp_path: Path) -> None:
    bundle = tmp_path / "b"
    context_folder(bundle / "envs" / "web")
    (bundle / "envs" / "web" / "env.toml").write_text('environment_name = "web"\n')
    (bundle / "tasks").mkdir()
    (bundle / "tasks" / ".draft.json").write_text("not json")  # tasks/ still skip dot-files
    parsed, problems = parse_bundle(bundle, local_id_root(bundle))
    assert problems == []
    assert sorted(f.path for f in parsed.envs[0].files) == sorted([*KEPT, "env.toml"])


def test_an_image_artifact_is_a_build_context_and_a_file_artifact_is_not(tmp_path: Path) -> None:
    bundle = tmp_path / "b"
    context_folder(bundle / "artifacts" / "img")
    (bundle / "artifacts" / "data").mkdir(parents=True)
    (bundle / "artifacts" / "data" / "a.txt").write_text("a")
    (bundle / "artifacts" / "data" / ".hidden").write_text("h")
    (bundle / "artifacts" / "data" / ".truth").mkdir()
    (bundle / "artifacts" / "data" / ".truth" / "expected.txt").write_text("e")
    for dropped in (".git", "__pycache__"):  # version control and caches are never kept
        (bundle / "artifacts" / "data" / dropped).mkdir()
        (bundle / "artifacts" / "data" / dropped / "x").write_text("x")
    (bundle / "artifacts" / "data" / ".DS_Store").write_text("litter")
    parsed, problems = parse_bundle(bundle, local_id_root(bundle))
    assert problems == []
    by_name = {a.name: sorted(f.path for f in a.files) for a in parsed.artifacts}
    # a file artifact keeps its dot-files and dot-folders, as a task ships them
    assert by_name == {"img": KEPT, "data": [".hidden", ".truth/expected.txt", "a.txt"]}


def test_an_exception_can_bring_back_a_file_inside_an_ignored_folder(tmp_path: Path) -> None:
    folder = context_folder(tmp_path / "ctx", "*\n!Dockerfile\n!src/keep/**\n")
    (folder / "src" / "keep").mkdir(parents=True)
    (folder / "src" / "keep" / "a.py").write_text("a")
    (folder / "src" / "drop.py").write_text("b")
    problems: list[str] = []
    files = collect_files(folder, "ctx", problems, build_context=True)
    assert problems == []
    assert sorted(f.path for f in files) == [".dockerignore", "Dockerfile", "src/keep/a.py"]


def test_a_bad_dockerignore_is_a_problem_not_a_silent_full_context(tmp_path: Path) -> None:
    folder = context_folder(tmp_path / "ctx", "[unclosed\n")
    problems: list[str] = []
    assert collect_files(folder, "envs/x", problems, build_context=True) == []
    assert problems == ["envs/x/.dockerignore: .dockerignore pattern '[unclosed' has an "
                        "unclosed '['"]


def test_env_put_stores_no_ignored_file(state_root: Path, tmp_path: Path, capsys: Any) -> None:
    folder = context_folder(tmp_path / "ctx")
    assert cli(capsys, "env", "mcp-server", "put", "--id", "web", "--context", str(folder),
               "--environment-name", "web")[0] == 0
    from agent_env.runtime import current

    record = current().versioned_store.get("envs", "web")
    assert sorted(record.body["files"]) == KEPT
    objects = current().object_store
    stored = b"".join(objects.get(meta["key"]) for meta in record.body["files"].values())
    assert b"s3cr3t" not in stored
    # a change to an ignored file is no change to the env
    (folder / "secret.json").write_text(json.dumps({"token": "rotated"}))
    assert cli(capsys, "env", "mcp-server", "put", "--id", "web", "--context", str(folder),
               "--environment-name", "web")[1] == "env web: v1, unchanged\n"


def test_agent_put_honours_the_dockerignore_of_its_own_dockerfile(
        state_root: Path, tmp_path: Path, capsys: Any) -> None:
    folder = context_folder(tmp_path / "agent")
    (folder / "Dockerfile").rename(folder / "agent.Dockerfile")
    (folder / "agent.toml").write_text('type = "a2a"\ndockerfile = "agent.Dockerfile"\n')
    (folder / ".dockerignore").write_text("*.Dockerfile\nsecret.json\n")
    from agentenv_agents.stored import agent_files

    files = agent_files("a", folder, None, tmp_path)
    assert "secret.json" not in [f.path for f in files]
    assert "agent.Dockerfile" in [f.path for f in files]  # always sent, as the Docker CLI does
