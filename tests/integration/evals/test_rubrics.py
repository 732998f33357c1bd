"""``rubrics_verifier`` against a scripted fake judge (an OpenAI-compatible HTTP endpoint here:
a real judge model cannot run on this machine)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web

from agent_env.evals.rubrics import parse_judgement
from agent_env.tasks.artifacts import MemoryArtifacts
from agent_env.tasks.context import TaskContext
from agent_env.tasks.engine import TaskResult, run_task
from agent_env.tasks.plan import TaskSpec

#: criterion text -> what the scripted judge answers (a status code for an outage)
ANSWERS: dict[str, Any] = {
    "is polite": '{"score": 1, "justification": "it says please"}',
    "is concise": 'Sure! {"score": 0.5, "justification": "two sentences too many"}',
    "is garbled": "I would say it mostly passes.",
    "judge is down": 503,
}

#: criterion text -> its result in a batched answer (a criterion not here is left out)
BATCH_ANSWERS = {"is polite": '{"score": 1, "justification": "it says please"}',
                 "is concise": '{"score": 0.5, "justification": "two sentences too many"}',
                 "is kind": '{"score": 0, "justification": "curt"}'}


@pytest.fixture
async def judge(state_root, monkeypatch) -> AsyncIterator[list[dict[str, Any]]]:
    """The scripted fake judge; yields the requests it got. ``[model]`` points at it."""
    from agent_env import runtime

    seen: list[dict[str, Any]] = []

    async def completions(request: web.Request) -> web.Response:
        body = await request.json()
        seen.append({"body": body, "auth": request.headers.get("Authorization")})
        question = body["messages"][1]["content"]
        if question.startswith("Criteria:\n"):  # a batch: one result per criterion listed
            listed = json.loads(question.removeprefix("Criteria:\n").split("\n\n")[0])
            results = [{"id": c["id"], **json.loads(BATCH_ANSWERS[c["criterion"]])}
                       for c in listed if c["criterion"] in BATCH_ANSWERS]
            return web.json_response({"choices": [{"message": {
                "role": "assistant", "content": json.dumps({"results": results})}}]})
        criterion = question.split("\n")[0].removeprefix("Criterion: ")
        answer = ANSWERS[criterion]
        if isinstance(answer, int):
            return web.Response(status=answer, text="overloaded")
        return web.json_response({"choices": [{"message": {"role": "assistant",
                                                            "content": answer}}]})

    app = web.Application()
    app.router.add_post("/v1/chat/completions", completions)
    server = web.AppRunner(app)
    await server.setup()
    site = web.TCPSite(server, "127.0.0.1", 0)
    await site.start()
    port = server.addresses[0][1]
    monkeypatch.setenv("AGENT_ENV_MODEL_BASE_URL", f"http://127.0.0.1:{port}/v1")
    monkeypatch.setenv("AGENT_ENV_MODEL_API_KEY", "sk-judge-secret-0123456789")
    runtime.reset()
    yield seen
    await server.cleanup()


async def run(step: dict[str, Any]) -> tuple[TaskResult, TaskContext]:
    ctx = TaskContext(task_id="t", instance_id="t-12345678", artifacts=MemoryArtifacts())
    spec = TaskSpec("t", "t", [{"id": "judge", "type": "rubrics_verifier",
                                "judge_model": "judge-1", "text": "Please find it.", **step}])
    return await run_task(spec, ctx), ctx


async def test_weighted_criteria_and_an_unparseable_answer_as_an_error_row(judge) -> None:
    result, ctx = await run({"criteria": [{"criterion": "is polite", "weight": 2},
                                          {"criterion": "is concise"},
                                          {"criterion": "is garbled"}]})
    # (1 * 2 + 0.5 * 1 + 0 * 1) / 4
    assert result.scores == {"judge": 0.625} and result.outcome == "scored below 1"
    rows = ctx.verifications["judge"].results
    assert [r.score for r in rows] == [1.0, 0.5, 0.0]
    assert rows[0].justification == "it says please"
    assert rows[2].result is False and rows[2].justification.startswith(
        "error: the judge's answer is unusable")
    assert judge[0]["body"]["model"] == "judge-1"
    assert judge[0]["auth"] == "Bearer sk-judge-secret-0123456789"
    assert "sk-judge-secret" not in json.dumps(ctx.snapshot())


async def test_a_judge_outage_is_an_infrastructure_error(judge) -> None:
    result, _ = await run({"criteria": [{"criterion": "judge is down"}]})
    assert result.outcome == "error"
    assert "the judge upstream answered 503" in result.describe()


def test_judgements() -> None:
    assert parse_judgement('{"score": 0.25, "justification": "x"}') == (0.25, "x")
    for bad in ("yes", '{"score": 2}', '{"score": true}', '{"justification": "x"}'):
        with pytest.raises(ValueError):
            parse_judgement(bad)


async def test_the_runs_judge_model_answers_a_rubric_that_names_none(judge) -> None:
    """``--judge-model`` (the run's ``choices.judge_model``) is the judge when the step names
    none; the record keeps the choice."""
    from agent_env.tasks.steps import RunChoices

    ctx = TaskContext(task_id="t", instance_id="t-12345678", artifacts=MemoryArtifacts(),
                      choices=RunChoices(judge_model="judge-from-the-run"),
                      metadata=RunChoices(judge_model="judge-from-the-run").recorded())
    spec = TaskSpec("t", "t", [{"id": "judge", "type": "rubrics_verifier",
                                "text": "Please find it.",
                                "criteria": [{"criterion": "is polite"}]}])
    result = await run_task(spec, ctx)
    assert result.outcome == "passed", result.describe()
    assert judge[0]["body"]["model"] == "judge-from-the-run"
    assert ctx.snapshot()["metadata"]["judge_model"] == "judge-from-the-run"


async def test_batched_criteria_are_one_question_each_batch(judge) -> None:
    """The reference's ``judge_batch_size``: three criteria in batches of two are two judge
    calls; a criterion the answer leaves out is an error row, not a pass."""
    result, ctx = await run({"judge_batch_size": 2, "effort": "low", "criteria": [
        {"criterion": "is polite"}, {"criterion": "is kind"}, {"criterion": "is garbled"}]})
    assert len(judge) == 2
    assert all(seen["body"]["reasoning_effort"] == "low" for seen in judge)
    rows = ctx.verifications["judge"].results
    assert [(r.score, r.justification) for r in rows] == [
        (1.0, "it says please"), (0.0, "curt"),
        (0.0, "error: the judge's answer has no result for c3")]
    assert result.scores == {"judge": pytest.approx(1 / 3)}


async def test_a_binary_rubric_refuses_a_partial_score(judge) -> None:
    _, ctx = await run({"output_format": "rubric_binary",
                        "criteria": [{"criterion": "is polite"}, {"criterion": "is concise"}]})
    rows = ctx.verifications["judge"].results
    assert [r.score for r in rows] == [1.0, 0.0]
    assert rows[1].justification == ("error: the judge scored 0.5, not 0 or 1 "
                                      "(output_format rubric_binary)")
    assert "binary" in judge[0]["body"]["messages"][0]["content"]


async def test_the_runs_judge_model_replaces_the_steps(judge) -> None:
    """``--judge-model`` replaces the model a step names, as the reference's does."""
    from agent_env.tasks.steps import RunChoices

    ctx = TaskContext(task_id="t", instance_id="t-12345678", artifacts=MemoryArtifacts(),
                      choices=RunChoices(judge_model="judge-from-the-run"))
    spec = TaskSpec("t", "t", [{"id": "judge", "type": "rubrics_verifier",
                                "judge_model": "judge-of-the-step", "text": "Please find it.",
                                "criteria": [{"criterion": "is polite"}]}])
    await run_task(spec, ctx)
    assert judge[0]["body"]["model"] == "judge-from-the-run"
