from agent_env.tasks import scores
from agent_env.tasks.scores import ScoreRow


def row(score: float, weight: float = 1.0, skipped: bool = False) -> ScoreRow:
    return ScoreRow(0, score, score >= 1, weight=weight, skipped=skipped)


def test_all_and_any_pass():
    assert scores.aggregate("all_pass", [row(1), row(1)]) == 1
    assert scores.aggregate("all_pass", [row(1), row(0)]) == 0
    assert scores.aggregate("any_pass", [row(0), row(1)]) == 1
    assert scores.aggregate("any_pass", [row(0), row(0)]) == 0


def test_no_rows_score_zero():
    for name in scores.AGGREGATORS:
        assert scores.aggregate(name, []) == 0


def test_skipped_rows_do_not_count():
    assert scores.aggregate("all_pass", [row(1), row(0, skipped=True)]) == 1


def test_weighted_average_with_negative_weights_is_clamped():
    assert scores.aggregate("weighted_average", [row(1, 3), row(0, 1)]) == 0.75
    # a failed negative criterion subtracts (1 - score) * |w|
    assert scores.aggregate("weighted_average", [row(1, 2), row(0, -1)]) == 0.5
    assert scores.aggregate("weighted_average", [row(0, 1), row(0, -5)]) == 0
    assert scores.aggregate("weighted_average", [row(1, 1), row(1, -5)]) == 1
    assert scores.aggregate("weighted_average", [row(1, -1)]) == 0  # no positive weight


def test_outcome_order():
    assert scores.outcome(cancelled=True, failed=True, scores={}) == "cancelled"
    assert scores.outcome(cancelled=False, failed=True, scores={"a": 1}) == "failed"
    assert scores.outcome(cancelled=False, failed=False, scores={}) == "unscored"
    assert scores.outcome(cancelled=False, failed=False, scores={"a": 1, "b": 1.0}) == "passed"
    assert scores.outcome(cancelled=False, failed=False, scores={"a": 1, "b": 0.5}) == \
        "scored below 1"


def test_format_scores():
    assert scores.format_scores({"hello": 1.0, "b": 0.0, "c": 0.666}) == "hello: 1, b: 0, c: 0.67"
