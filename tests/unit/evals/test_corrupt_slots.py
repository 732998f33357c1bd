"""Issue 31, class 16: a corrupt run-slot row (edited by hand, half-written by another tool)
under ``eval run --resume`` used to stop the resume with a traceback; it is run again."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_env.evals.groups import DONE, Group, GroupStore, Slot
from agent_env.stores.sqlite import SqliteDocumentStore

SLOTS = tuple(Slot(i, "@t/task", 1, i + 1) for i in range(3))


@pytest.mark.parametrize("row", [
    {"state": 5, "rev": 1, "index": 1},
    {"state": DONE, "rev": "two", "index": 1, "outcome": "passed", "instance_id": "x"},
    {"state": DONE, "index": 1, "outcome": "passed", "instance_id": 7, "rev": 3},
    {"rev": 1, "index": "1"},
])
def test_a_corrupt_slot_row_is_run_again(tmp_path: Path, row: dict) -> None:
    documents = SqliteDocumentStore(tmp_path / "d.sqlite3")
    try:
        group = Group("evalrun-corrupt1", "eval", "@t/eval", 1, 3, SLOTS)
        store = GroupStore(documents)
        store.create(group)
        assert store.claim(group, SLOTS[0]).state == "mine"
        store.finish(group, SLOTS[0], "run-0", "passed", ["run-0"])
        documents.insert("eval_run_slots", {"_id": f"{group.group_id}#1",
                                            "group": group.group_id, **row})
        resumed = GroupStore(documents)  # another process resuming the group
        assert sorted(resumed.slot_documents(group)) == [0]  # the corrupt row is not reused
        assert resumed.claim(group, SLOTS[0]).state == "done"
        assert resumed.claim(group, SLOTS[1]).state == "mine"
        resumed.finish(group, SLOTS[1], "run-1", "failed", ["run-1"])
        assert resumed.slot_documents(group)[1]["outcome"] == "failed"
    finally:
        documents.close()
