"""Issue 31, class 13: run counts have an upper bound, checked before anything is made (``--k
1000000000`` used to spin, growing by ~110 MB/s, materialising slots)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from cli_runner import cli


@pytest.mark.parametrize("args, why", [
    (("eval", "run", "--id", "e", "--k", "1000000000"), "--k 1000000000: at most 10,000 runs"),
    (("task", "run", "--id", "t", "--k", "10001"), "--k 10001: at most 10,000 runs"),
    (("eval", "run", "--id", "e", "--retries", "1000000"), "--retries 1000000: give 0 to 100"),
])
def test_counts_over_their_bound_are_one_line(state_root: Path, capsys: Any, args: tuple[str, ...],
                                              why: str) -> None:
    from agent_env.runs import MAX_K

    assert MAX_K == 10_000
    if args[0] == "task":  # task run reads its task first: store one
        steps = state_root.parent / "t.json"
        steps.write_text('[{"id": "s", "type": "deploy_sandbox", "sandbox_type": "local"}]')
        assert cli(capsys, "task", "create", "--id", "t", str(steps))[0] == 0
    started = time.monotonic()
    code, _, err = cli(capsys, *args)
    assert code != 0 and why in err and len(err.strip().splitlines()) == 1, err
    assert time.monotonic() - started < 5


def test_a_group_of_too_many_runs_is_refused_before_its_slots_exist() -> None:
    from agent_env.errors import UserError
    from agent_env.runs import check_group_size

    check_group_size(10, 10_000)
    with pytest.raises(UserError, match=r"11 tasks x --k 10000 = 110,000 runs: at most 100,000"):
        check_group_size(11, 10_000)
