"""Eval files: what is accepted, what is refused (one line each), and versions like the ledger's."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_env.errors import UserError
from agent_env.evals.entity import EvalTask, parse_eval, put_eval, read_eval_file


def test_a_list_or_an_object_of_ids_and_pinned_versions() -> None:
    parsed = parse_eval("e.json", ["a", {"task_id": "b", "task_version": 2},
                                   {"task_id": "c", "task_version": None}])
    assert parsed.tasks == (EvalTask("a"), EvalTask("b", 2), EvalTask("c"))
    wrapped = parse_eval("e.json", {"tasks": ["a"], "type": "smoke"})
    assert wrapped.tasks == (EvalTask("a"),) and wrapped.type == "smoke"


@pytest.mark.parametrize(("data", "message"), [
    (["a", "a"], "e.json: task a is listed twice"),
    ([], "e.json: the eval lists no tasks"),
    ({"tasks": "a"}, "e.json: an eval file is a list of tasks"),
    ([{"task_id": "a", "task_version": 0}], "task_version must be a version number"),
    ([{"task_id": "a", "version": 1}], "unknown key 'version'"),
    ([3], "expected a task id"),
    ({"tasks": ["a"], "runs": 3}, "unknown key 'runs'"),
])
def test_bad_eval_files(data: object, message: str) -> None:
    with pytest.raises(UserError, match=message.replace("(", r"\(")):
        parse_eval("e.json", data)


def test_toml_files(tmp_path: Path) -> None:
    path = tmp_path / "e.toml"
    path.write_text('tasks = ["a", {task_id = "b", task_version = 1}]\n')
    assert read_eval_file(path).tasks == (EvalTask("a"), EvalTask("b", 1))
    path.write_text("tasks = [\n")
    with pytest.raises(UserError, match=r"e.toml:\d+: invalid TOML"):
        read_eval_file(path)


def test_versions_follow_the_ledger_rules(state_root: Path) -> None:
    from agent_env.runtime import current

    versioned = current().versioned_store
    versioned.put("tasks", "a", {"steps": []})
    versioned.put("tasks", "b", {"steps": []})
    record, created, reason = put_eval(versioned, "e", [EvalTask("a")])
    assert (record.version, created, reason) == (1, True, "new")
    record, created, _ = put_eval(versioned, "e", [EvalTask("a")])
    assert (record.version, created) == (1, False)
    record, created, reason = put_eval(versioned, "e", [EvalTask("a"), EvalTask("b", 1)])
    assert (record.version, created, reason) == (2, True, "tasks added: b v1")
    assert record.body["tasks"] == [{"task_id": "a", "task_version": None},
                                    {"task_id": "b", "task_version": 1}]


def test_a_missing_task_or_version_writes_nothing(state_root: Path) -> None:
    from agent_env.runtime import current

    versioned = current().versioned_store
    versioned.put("tasks", "a", {"steps": []})
    with pytest.raises(UserError) as caught:
        put_eval(versioned, "e", [EvalTask("a", 2), EvalTask("nope")])
    assert caught.value.message == ("2 tasks are not stored: a v2, nope (agent-env task create "
                                    "FILE --id ID stores one); nothing was written")
    assert versioned.get("evals", "e") is None
