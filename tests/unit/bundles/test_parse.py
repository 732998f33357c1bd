"""Parsing bundle folders: strict JSON, entity types, ids, ignored files, escapes."""

import json
import os
from pathlib import Path

import pytest

from agent_env.bundles.jsonfile import StrictJSONError, loads_strict
from agent_env.bundles.model import local_id_root
from agent_env.bundles.parse import parse_bundle
from agent_env.errors import UserError


@pytest.mark.parametrize("text, message, line", [
    ('[\n{"a": 1, "a": 2}]', 'duplicate key "a"', 2),
    ('[\n\n{"a": NaN}]', "NaN is not valid JSON", 3),
    ('[{"a": -Infinity}]', "-Infinity is not valid JSON", 1),
    ('[\n{"a": 1,}\n]', "invalid JSON", 2),
])
def test_strict_json_refuses(text, message, line):
    with pytest.raises(StrictJSONError) as caught:
        loads_strict(text)
    assert message in caught.value.message
    assert caught.value.line == line


def make_bundle(root: Path) -> Path:
    (root / "tasks").mkdir(parents=True)
    (root / "artifacts/greeting").mkdir(parents=True)
    (root / "artifacts/one").mkdir(parents=True)
    (root / "evals").mkdir()
    (root / "README.md").write_text("\n# A test bundle\n\nMore.\n")
    (root / "artifacts/greeting/hello.txt").write_text("hello\n")
    (root / "artifacts/greeting/check.sh").write_text("grep hello hello.txt\n")
    (root / "artifacts/greeting/.hidden").write_text("x")
    (root / "artifacts/greeting/__pycache__").mkdir()
    (root / "artifacts/greeting/__pycache__/x.pyc").write_text("x")
    (root / "artifacts/one/verify.py").write_text("def run(i): return 1\n")
    (root / "tasks/t.json").write_text(json.dumps([{"id": "a", "type": "deploy_sandbox"}]))
    (root / "evals/smoke.toml").write_text('tasks = ["t.json"]\n')
    return root


def test_parse_a_bundle(tmp_path):
    folder = make_bundle(tmp_path / "b")
    bundle, problems = parse_bundle(folder, local_id_root(folder))
    assert problems == []
    assert bundle.description == "A test bundle"
    greeting = next(a for a in bundle.artifacts if a.name == "greeting")
    assert greeting.type == "file_artifact_universe"
    # a dot-file is part of the artifact (a task's tests/.truth/ must reach the container)
    assert [f.path for f in greeting.files] == [".hidden", "check.sh", "hello.txt"]
    assert next(a for a in bundle.artifacts if a.name == "one").type == "file"
    assert bundle.tasks[0].label == "tasks/t.json"
    assert bundle.evals[0].task_names == ("t.json",)
    assert bundle.contents() == "1 task, 1 eval"


def test_local_id_root_shows_home_as_tilde(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    assert local_id_root(tmp_path / "x" / "b") == "@local/~/x/b"
    assert local_id_root(Path("/opt/b")) == "@local/opt/b"


def test_not_a_bundle(tmp_path):
    with pytest.raises(UserError, match="not a bundle: it has none of envs/"):
        parse_bundle(tmp_path, "@local/x")


def test_symlink_out_of_an_artifact_is_a_problem(tmp_path):
    folder = make_bundle(tmp_path / "b")
    os.symlink("/etc/passwd", folder / "artifacts/greeting/evil")
    _, problems = parse_bundle(folder, "@local/b")
    assert any("evil is a symlink out of its folder" in p for p in problems)


def test_task_file_must_be_an_array_of_objects(tmp_path):
    folder = make_bundle(tmp_path / "b")
    (folder / "tasks/obj.json").write_text('{"name": "obj"}')
    (folder / "tasks/empty.json").write_text('{"steps": []}')
    (folder / "tasks/mixed.json").write_text('[1, {"id": "a", "type": "x"}]')
    _, problems = parse_bundle(folder, "@local/b")
    assert ("tasks/obj.json: must be a JSON array of step objects (or an object with steps), "
            "not an object") in problems
    assert "tasks/empty.json: has no steps" in problems
    assert "tasks/mixed.json: step 1 must be an object" in problems


def test_a_task_file_as_other_tools_export_it_reads_as_ours(tmp_path):
    """An exported task: an object with ``steps``, unset keys as ``null``, and ``depends_on``
    entries as ``{"task_step_id": ...}`` objects."""
    folder = make_bundle(tmp_path / "b")
    (folder / "tasks/exported.json").write_text(json.dumps({"steps": [
        {"id": "a", "type": "x", "version": None, "sandbox_type": None},
        {"id": "b", "type": "x", "depends_on": [{"task_step_id": "a"}], "env_id": None},
    ]}))
    bundle, problems = parse_bundle(folder, "@local/b")
    assert not [p for p in problems if "exported" in p], problems
    [task] = [t for t in bundle.tasks if t.name == "exported"]
    assert task.raw_steps == ({"id": "a", "type": "x"},
                              {"id": "b", "type": "x", "depends_on": ["a"]})


def test_eval_naming_a_missing_task(tmp_path):
    folder = make_bundle(tmp_path / "b")
    (folder / "evals/bad.toml").write_text('tasks = ["nope.json"]\n')
    _, problems = parse_bundle(folder, "@local/b")
    assert any(p.startswith("evals/bad.toml: task 'nope.json' names no file") for p in problems)


def test_agents_and_skills_folders(tmp_path):
    """``agents/<name>`` (a Dockerfile, an agent.toml or both) and ``skills/<name>`` (a folder
    holding SKILL.md, stored as an artifact), as the reference lays bundles out."""
    folder = make_bundle(tmp_path / "b")
    (folder / "agents/helper").mkdir(parents=True)
    (folder / "agents/helper/Dockerfile").write_text("FROM python:3.11-slim\n")
    (folder / "agents/helper/.dockerignore").write_text("notes.txt\n")
    (folder / "agents/helper/notes.txt").write_text("not sent\n")
    (folder / "skills/tone").mkdir(parents=True)
    (folder / "skills/tone/SKILL.md").write_text("Be brief.\n")
    bundle, problems = parse_bundle(folder, local_id_root(folder))
    assert problems == []
    (agent,) = bundle.agents
    assert (agent.name, agent.label) == ("helper", "agents/helper")
    assert [f.path for f in agent.files] == [".dockerignore", "Dockerfile"]
    tone = next(a for a in bundle.artifacts if a.name == "tone")
    assert (tone.label, tone.type, [f.path for f in tone.files]) == (
        "skills/tone", "skill", ["SKILL.md"])
    assert bundle.entity_ids()["agents"] == {"helper": agent.id}
    assert bundle.entity_ids()["artifacts"]["tone"] == tone.id


def test_agents_and_skills_folders_that_cannot_be_one(tmp_path):
    folder = make_bundle(tmp_path / "b")
    (folder / "agents/empty").mkdir(parents=True)
    (folder / "agents/loose.txt").write_text("x")
    (folder / "skills/nothing").mkdir(parents=True)
    (folder / "skills/one").mkdir(parents=True)
    (folder / "skills/one/SKILL.md").write_text("x")  # artifacts/one is taken
    _, problems = parse_bundle(folder, local_id_root(folder))
    assert problems == [
        "agents/empty: needs a Dockerfile or an agent.toml",
        "agents/loose.txt: an agent is a folder (a Dockerfile, an agent.toml or both), not a file",
        "skills/nothing: a skill is a folder holding SKILL.md",
        "artifacts/one and skills/one share a name; artifacts and skills share one store, so "
        "rename one",
    ]


def test_a_key_of_each_object_in_a_list_is_an_entity_field():
    from agent_env.tasks.steps import Step, entity_values, rewrite_entity_refs

    class WithSkills(Step):
        type = "with_skills"
        entity_fields = {"skills[].artifact_id": "artifacts"}

    raw = {"id": "s", "skills": [{"artifact_id": "tone", "name": "t"}, {"skill_md": "x"}, 3]}
    out = rewrite_entity_refs(raw, WithSkills, {"artifacts": {"tone": "@local/b/tone"}})
    assert out["skills"] == [{"artifact_id": "@local/b/tone", "name": "t"}, {"skill_md": "x"}, 3]
    assert raw["skills"][0]["artifact_id"] == "tone"  # a copy
    assert entity_values(out, "skills[].artifact_id") == ["@local/b/tone"]
