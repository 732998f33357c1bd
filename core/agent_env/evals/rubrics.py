"""``rubrics_verifier``: an LLM judge scores a reply (or a text) against weighted criteria.

Each criterion (``{"criterion": "...", "weight": 2}``) is one question to the judge model, which
answers JSON ``{"score": 0..1, "justification": "..."}``; the rows are aggregated with
``score_aggregator`` (``weighted_average`` by default). An answer that is not that JSON is an
error row (score 0, its justification starting ``error:``), never a pass. The judge is the model
``judge_model`` names (else the run's ``--judge-model``, else ``[model] name``), asked (OpenAI
Chat Completions) through the run's model gateway when one is up (``ctx.model_endpoint``: the
agents plugin's; a ``scripted:`` judge answers offline, and the gateway's call log keeps the
judge's calls with their tokens beside the agent's), else through the configured upstream
``[model] base_url``; the upstream key never reaches a record. An endpoint that cannot be
reached or fails (5xx, 429, a refusal) is infrastructure's (``InfraError``): the run is
``error``, not the agent's 0.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

import attrs

from agent_env.tasks.scores import AGGREGATORS, ScoreRow
from agent_env.tasks.steps import PreflightView, Step, StepError

if TYPE_CHECKING:
    from agent_env.tasks.context import TaskContext

SYSTEM = ("You grade a response against one criterion. Answer with JSON only: "
          '{"score": <a number from 0 to 1>, "justification": "<one sentence>"}.')


def parse_judgement(content: str) -> tuple[float, str]:
    """``(score, justification)`` from the judge's answer; ValueError when it has none."""
    text = content.strip()
    match = re.search(r"\{.*\}", text, re.DOTALL)
    try:
        data = json.loads(match.group(0) if match else text)
    except json.JSONDecodeError:
        raise ValueError(f"not JSON: {text[:120]!r}") from None
    score = data.get("score") if isinstance(data, dict) else None
    if isinstance(score, bool) or not isinstance(score, int | float) or not 0 <= score <= 1:
        raise ValueError(f"no score from 0 to 1 in {text[:120]!r}")
    return float(score), str(data.get("justification") or "")


@attrs.define(kw_only=True)
class RubricsVerifier(Step):
    type = "rubrics_verifier"

    #: ``[{"criterion": "...", "weight": 1}]``: one judge question each
    criteria: list[dict[str, Any]] = attrs.field(factory=list)
    #: the prompt whose reply is judged (a prompt_agent's id) ...
    prompt_id: str | None = None
    #: ... or a text to judge as it is
    text: str | None = None
    judge_model: str | None = None
    score_aggregator: str = "weighted_average"
    timeout_seconds: float = 120
    verifier_id: str | None = None

    def check(self, view: PreflightView) -> list[str]:
        problems = super().check(view)
        if (self.prompt_id is None) == (self.text is None):
            problems.append("give prompt_id (a reply to judge) or text, one of them")
        if self.score_aggregator not in AGGREGATORS:
            problems.append(f"score_aggregator '{self.score_aggregator}' is not known "
                            f"(known: {', '.join(AGGREGATORS)})")
        if not self.criteria:
            problems.append("criteria is empty (give [{\"criterion\": \"...\"}])")
        for index, item in enumerate(self.criteria):
            if not isinstance(item, dict) or not isinstance(item.get("criterion"), str):
                problems.append(f"criteria[{index}] needs 'criterion', the text to judge by")
            elif not isinstance(item.get("weight", 1), int | float):
                problems.append(f"criteria[{index}]: weight must be a number")
        return problems

    def _subject(self, ctx: TaskContext) -> str:
        if self.text is not None:
            return self.text
        from agent_env.agents import find_reply

        reply = find_reply(ctx, str(self.prompt_id))
        if reply is None:
            raise StepError(f"no reply to prompt '{self.prompt_id}' is recorded")
        return str(reply.get("response") or "")

    async def run(self, ctx: TaskContext) -> None:
        from agent_env.models import chat
        from agent_env.runtime import current

        settings = current().config.section("model")
        model = self.judge_model or ctx.choices.judge_model or settings.get("name")
        if not model:
            raise StepError("the judge needs a model: set judge_model (or [model] name)")
        subject = self._subject(ctx)
        rows = []
        for index, item in enumerate(self.criteria):
            content = await chat(ctx, str(model), [
                {"role": "system", "content": SYSTEM},
                {"role": "user", "content": f"Criterion: {item['criterion']}\n\n"
                                            f"Response:\n{subject}"}],
                timeout=float(self.timeout_seconds), who="the judge")
            weight = float(item.get("weight", 1))
            try:
                score, why = parse_judgement(content)
            except ValueError as exc:
                rows.append(ScoreRow(index, 0.0, False, f"error: the judge's answer is "
                                     f"unusable ({exc})", weight=weight, criterion=item))
                continue
            rows.append(ScoreRow(index, score, score >= 1, why, weight=weight, criterion=item))
        ctx.record_verification(self, self.verifier_id, rows, self.score_aggregator)

