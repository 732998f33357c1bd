"""pass@k against values worked out by hand from 1 - C(n-c, k) / C(n, k)."""

from __future__ import annotations

import pytest

from agent_env.evals.passk import pass_at_k


@pytest.mark.parametrize(("n", "c", "k", "expected"), [
    (5, 0, 1, 0.0),            # nothing passed
    (5, 5, 5, 1.0),            # everything passed
    (5, 2, 1, 0.4),            # pass@1 is c/n: 1 - C(3,1)/C(5,1) = 1 - 3/5
    (5, 2, 2, 0.7),            # 1 - C(3,2)/C(5,2) = 1 - 3/10
    (5, 1, 5, 1.0),            # n-c = 4 < k: every 5 runs include the pass
    (10, 3, 5, 1 - 21 / 252),  # 1 - C(7,5)/C(10,5) = 1 - 21/252 = 0.91666...
    (20, 1, 10, 0.5),          # 1 - C(19,10)/C(20,10) = 1 - 92378/184756
    (4, 1, 2, 0.5),            # 1 - C(3,2)/C(4,2) = 1 - 3/6
])
def test_hand_computed_values(n: int, c: int, k: int, expected: float) -> None:
    assert pass_at_k(n, c, k) == pytest.approx(expected, abs=1e-12)


def test_fewer_runs_than_k_give_no_estimate() -> None:
    assert pass_at_k(3, 3, 5) is None
    assert pass_at_k(0, 0, 1) is None


@pytest.mark.parametrize(("n", "c", "k"), [(5, 6, 1), (5, -1, 1), (5, 1, 0)])
def test_impossible_counts_are_refused(n: int, c: int, k: int) -> None:
    with pytest.raises(ValueError, match="pass@k needs"):
        pass_at_k(n, c, k)
