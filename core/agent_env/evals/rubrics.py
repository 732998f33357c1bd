"""``rubrics_verifier``: a judge scores an agent's reply (or a text) against weighted criteria.

Each criterion (``{"criterion": "...", "weight": 2}``) is graded ``0..1`` with a justification;
the rows are aggregated with ``score_aggregator`` (``weighted_average`` by default). By default
every criterion is its own question (``judge_batch_size`` groups several into one question,
answered as ``{"results": [{"id", "score", "justification"}]}``). An answer that is not that
JSON, or (``output_format: rubric_binary``) a score other than 0 or 1, is an error row (score 0,
its justification starting ``error:``), never a pass.

What the judge reads: the reply (cut at ``grade_up_to_turn`` of a conversation), and on request
the agent's trajectory (``use_trajectory``, rendered compactly as ``trajectory_filter`` says),
the conversation (``run_context_for_judge: ["conversation"]``), values from the run's record
(``context_facts_for_judge``) and the task's own rules (``grading_policy_prompt``).

Who judges: the model ``--judge-model`` names, else the step's ``judge_model`` (the reference's
``default_model``), else ``[model] roles.judge``, else ``[model] default``, asked (OpenAI Chat
Completions) through the run's model gateway when one is up (``ctx.model_endpoint``: the agents
plugin's; a ``scripted:`` judge answers offline, and the gateway's call log keeps the judge's
calls beside the agent's), else through the configured upstream; the upstream key never reaches
a record. With ``use_agent_judge`` an agent judges instead: the deployed agent ``agent_name``
names, or one this step deploys (``judge_a2a_agent_id``, else ``[agents] default``) through the
``deploy_agent`` step type of whichever plugin provides it. An endpoint that cannot be reached
or fails (5xx, 429, a refusal) is infrastructure's (``InfraError``): the run is ``error``, not
the agent's 0.
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import TYPE_CHECKING, Any

import attrs

from agent_env.tasks.scores import AGGREGATORS, ScoreRow
from agent_env.tasks.steps import PreflightView, RunChoices, Step, StepError, renamed_keys

if TYPE_CHECKING:
    from agent_env.tasks.context import TaskContext

SYSTEM = ("You grade a response against one criterion. Answer with JSON only: "
          '{"score": <a number from 0 to 1>, "justification": "<one sentence>"}.')
BATCH_SYSTEM = ("You grade a response against several criteria, each on its own evidence. "
                'Answer with JSON only: {"results": [{"id": "<the criterion id>", "score": '
                '<a number from 0 to 1>, "justification": "<one sentence naming what it rests '
                'on>"}, ...]} with one result per criterion.')
BINARY_NOTE = " Scores are binary: exactly 1 when the criterion is met, exactly 0 when not."

#: ``output_format`` values this judge answers in (the reference's other three cite screenshot
#: frames per criterion, and this judge reads a trajectory as text).
OUTPUT_FORMATS = ("rubric_partial", "rubric_binary")
#: What ``run_context_for_judge`` may add beyond the trajectory.
RUN_CONTEXT_PARTS = ("conversation",)
#: ``trajectory_filter`` keys read here, with their defaults (the reference's DEFAULT compaction).
FILTER_FLAGS = {"include_tool_calls": True, "include_tool_call_results": True,
                "include_response": True, "include_thinking": False}
#: The reference's filter keys that only steer its screenshot compaction (kept, unused).
SCREENSHOT_FILTER_KEYS = frozenset({"screenshot_last_n", "frame_strategy", "frame_budget",
                                    "trajectory_text", "evidence_exclude_pattern",
                                    "always_show_actions", "action_log_max_lines"})
#: One trajectory value (a tool's result, a model's thinking) is cut after this many characters.
TRAJECTORY_VALUE_CHARS = 2000
#: The judge agent this step deploys is named after it: ``judge-<step id>``.
JUDGE_AGENT_PREFIX = "judge-"
DEFAULT_BATCH_CONCURRENCY = 4
_FACT_PATH = re.compile(r"^[\w-]+(\.[\w-]+)*$")


def parse_judgement(content: str) -> tuple[float, str]:
    """``(score, justification)`` from the judge's answer; ValueError when it has none."""
    data = _json_object(content)
    return _score_of(data, content), str(data.get("justification") or "")


def parse_batch(content: str, ids: list[str]) -> dict[str, tuple[float, str]]:
    """``{id: (score, justification)}`` from a batched answer; ValueError when it has none.
    A criterion the answer leaves out is missing from the result."""
    data = _json_object(content)
    results = data.get("results")
    if not isinstance(results, list):
        raise ValueError(f"no 'results' list in {content.strip()[:120]!r}")
    found: dict[str, tuple[float, str]] = {}
    for item in results:
        if isinstance(item, dict) and item.get("id") in ids:
            found[str(item["id"])] = (_score_of(item, content),
                                      str(item.get("justification") or ""))
    return found


def _json_object(content: str) -> dict[str, Any]:
    text = content.strip()
    match = re.search(r"\{.*\}", text, re.DOTALL)
    try:
        data = json.loads(match.group(0) if match else text)
    except json.JSONDecodeError:
        raise ValueError(f"not JSON: {text[:120]!r}") from None
    if not isinstance(data, dict):
        raise ValueError(f"not a JSON object: {text[:120]!r}")
    return data


def _score_of(data: dict[str, Any], content: str) -> float:
    score = data.get("score")
    if isinstance(score, bool) or not isinstance(score, int | float) or not 0 <= score <= 1:
        raise ValueError(f"no score from 0 to 1 in {content.strip()[:120]!r}")
    return float(score)


def render_trajectory(events: list[Any], flags: dict[str, bool]) -> str:
    """The trajectory as the judge reads it: one line per event, long values cut, images named
    rather than shown, and the kinds of event ``flags`` leaves out dropped."""
    lines = []
    for event in events:
        if not isinstance(event, dict):
            continue
        kind = str(event.get("type") or event.get("kind") or "event")
        if kind in ("tool_call", "tool_use") and not flags["include_tool_calls"]:
            continue
        if kind in ("thinking", "reasoning") and not flags["include_thinking"]:
            continue
        if kind in ("answer", "response", "message") and not flags["include_response"]:
            continue
        shown = {k: v for k, v in event.items() if k not in ("type", "kind")}
        if not flags["include_tool_call_results"]:
            shown.pop("result", None)
            shown.pop("output", None)
        if isinstance(shown.get("images"), list):  # a screenshot is a note, not base64
            shown["images"] = [f"{image.get('mime_type', 'an')} image" if isinstance(image, dict)
                               else "an image" for image in shown["images"]]
        shown = {k: _cut(v) for k, v in shown.items()}
        lines.append(f"[{kind}] {json.dumps(shown, default=str, ensure_ascii=False)}")
    return "\n".join(lines) or "(the trajectory is empty)"


def _cut(value: Any) -> Any:
    """``value``, or its first :data:`TRAJECTORY_VALUE_CHARS` characters as text when longer."""
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    if len(text) <= TRAJECTORY_VALUE_CHARS:
        return value
    return text[:TRAJECTORY_VALUE_CHARS] + "…"


def lookup_fact(root: Any, path: str) -> Any:
    """The value at dotted ``path`` (dict keys, list indexes) in ``root``; KeyError if none."""
    node = root
    for segment in path.split("."):
        if isinstance(node, dict) and segment in node:
            node = node[segment]
        elif isinstance(node, list) and segment.isdigit() and int(segment) < len(node):
            node = node[int(segment)]
        else:
            raise KeyError(path)
    return node


@attrs.frozen
class Subject:
    """What one judgement reads: the prompt, the reply, and the context asked for."""

    prompt: str | None
    response: str
    sections: tuple[tuple[str, str], ...] = ()

    def text(self) -> str:
        parts = [] if self.prompt is None else [f"Prompt:\n{self.prompt}"]
        parts.append(f"Response:\n{self.response}")
        parts.extend(f"{title}:\n{body}" for title, body in self.sections)
        return "\n\n".join(parts)


@attrs.define(kw_only=True)
class RubricsVerifier(Step):
    type = "rubrics_verifier"
    example = {
        'id': 'judge',
        'type': 'rubrics_verifier',
        'prompt_id': 'ask',
        'judge_model': 'scripted:judge',
        'criteria': [{'id': 'polite', 'criterion': 'The reply is polite.'}],
    }

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
    #: ``rubric_partial``: any score from 0 to 1; ``rubric_binary``: 0 or 1 only.
    output_format: str = "rubric_partial"
    #: The judge also reads the agent's trajectory of the prompt (its tool calls and results).
    use_trajectory: bool = False
    #: Which parts of the trajectory it reads (the reference's DEFAULT compaction flags).
    trajectory_filter: dict[str, Any] | None = None
    #: The task's own grading rules, shown as a "Grading policy" section.
    grading_policy_prompt: str | None = None
    #: ``{label: dotted path}`` into the run's record (``verifications.check.score``,
    #: ``outputs.step.key``, ``seed.name``), shown as "Context facts".
    context_facts_for_judge: dict[str, str] | None = None
    #: Grade a conversation as it stood after this (1-based) turn of the agent.
    grade_up_to_turn: int | None = None
    #: ``["conversation"]``: the judge also reads the whole conversation (both sides).
    run_context_for_judge: list[str] | None = None
    #: Criteria per judge question (None: one each); batches are asked concurrently.
    judge_batch_size: int | None = None
    judge_batch_concurrency: int | None = None
    #: Reasoning effort asked of the judge (``reasoning_effort``; an agent judge's agent-config).
    effort: str | None = None
    #: An agent judge's thinking budget (agent-config); a model judge takes none.
    max_thinking_tokens: int | None = None
    #: An agent judges instead of a model call: the deployed agent ``agent_name``, else one
    #: this step deploys from ``judge_a2a_agent_id`` (else ``[agents] default``).
    use_agent_judge: bool = False
    agent_name: str | None = None
    judge_a2a_agent_id: str | None = None
    judge_sandbox_type: str | None = None
    #: The reference's own upstream for its judge; refused (see ``check``).
    default_model_api_base: str | None = None

    @classmethod
    def adapt(cls, raw: dict[str, Any]) -> dict[str, Any]:
        """The reference's ``default_model`` is our ``judge_model`` and its
        ``judge_timeout_seconds`` our ``timeout_seconds``."""
        return renamed_keys(raw, {"default_model": "judge_model",
                                  "judge_timeout_seconds": "timeout_seconds"})

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
        if self.timeout_seconds <= 0:
            problems.append("timeout_seconds must be positive")
        return problems + self._judge_problems() + self._context_problems()

    def _judge_problems(self) -> list[str]:
        problems = []
        if self.output_format not in OUTPUT_FORMATS:
            problems.append(f"output_format '{self.output_format}': this judge answers "
                            f"{' or '.join(OUTPUT_FORMATS)}; the evidence and mistakes formats "
                            "cite screenshot frames, and this judge reads a trajectory as text")
        for name in ("judge_batch_size", "judge_batch_concurrency", "grade_up_to_turn"):
            value = getattr(self, name)
            if value is not None and value < 1:
                problems.append(f"{name} must be 1 or more")
        if self.default_model_api_base is not None:
            problems.append("default_model_api_base: the judge asks the run's model gateway "
                            "(its calls are logged there); set the upstream with [model] "
                            "base_url instead")
        if self.use_agent_judge:
            if self.agent_name and self.judge_a2a_agent_id:
                problems.append("give agent_name (a deployed agent judges) or "
                                "judge_a2a_agent_id (one is deployed to judge), not both")
        else:
            if self.max_thinking_tokens is not None:
                problems.append("max_thinking_tokens: a model judge is asked over Chat "
                                "Completions, which takes no thinking budget; use effort, or "
                                "use_agent_judge")
            for name in ("agent_name", "judge_a2a_agent_id", "judge_sandbox_type"):
                if getattr(self, name) is not None:
                    problems.append(f"{name} picks the agent of an agent judge: set "
                                    "use_agent_judge: true too")
        return problems

    def _context_problems(self) -> list[str]:
        problems = []
        wants_reply = self.use_trajectory or self.grade_up_to_turn is not None \
            or self.run_context_for_judge
        if wants_reply and self.prompt_id is None:
            problems.append("use_trajectory, grade_up_to_turn and run_context_for_judge read an "
                            "agent's prompt: give prompt_id")
        if self.grade_up_to_turn is not None and self.use_trajectory:
            problems.append("grade_up_to_turn with use_trajectory: a trajectory is kept for the "
                            "whole conversation here, not per turn; set use_trajectory: false "
                            "(the judge then reads the conversation up to that turn)")
        extra = [p for p in (self.run_context_for_judge or []) if p not in RUN_CONTEXT_PARTS]
        if extra:
            problems.append(f"run_context_for_judge {extra}: only "
                            f"{', '.join(RUN_CONTEXT_PARTS)} can be shown here (trigger_log: "
                            "no env here records trigger firings)")
        problems.extend(self._filter_problems())
        for label, path in (self.context_facts_for_judge or {}).items():
            if not label or not isinstance(path, str) or not _FACT_PATH.match(path):
                problems.append(f"context_facts_for_judge '{label}': give a dotted path of "
                                "names, such as verifications.check.score")
        return problems

    def _filter_problems(self) -> list[str]:
        if self.trajectory_filter is None:
            return []
        problems = []
        if not self.use_trajectory:
            problems.append("trajectory_filter shapes the trajectory the judge reads: set "
                            "use_trajectory: true too")
        compaction = self.trajectory_filter.get("compaction_type", "default")
        if compaction != "default":
            problems.append(f"trajectory_filter compaction_type '{compaction}': only 'default' "
                            "is supported here (the judge reads a trajectory as text, its "
                            "screenshots as notes)")
        for key, value in self.trajectory_filter.items():
            if key in FILTER_FLAGS:
                if not isinstance(value, bool):
                    problems.append(f"trajectory_filter {key} must be true or false")
            elif key not in SCREENSHOT_FILTER_KEYS and key != "compaction_type":
                problems.append(f"trajectory_filter key '{key}' is not known (it takes "
                                f"{', '.join(sorted(FILTER_FLAGS))}, compaction_type)")
        return problems

    def needs(self, choices: RunChoices) -> list[str]:
        """An agent judge this step deploys must be installed or stored."""
        if not (self.use_agent_judge and self.agent_name is None):
            return []
        from agent_env.agents import default_agent_id

        if not (self.judge_a2a_agent_id or default_agent_id()):
            return ["use_agent_judge: no agent to judge with: set judge_a2a_agent_id (or "
                    "[agents] default), name a deployed one with agent_name, or set "
                    "use_agent_judge: false"]
        deploy = self._judge_deploy_step()
        if isinstance(deploy, str):
            return [deploy]
        return list(deploy.needs(RunChoices()))

    # -- running ---------------------------------------------------------------------------

    def _model(self, ctx: TaskContext) -> str | None:
        from agent_env.models import model_settings

        return ctx.choices.judge_model or self.judge_model or model_settings().model_for("judge")

    def _subject(self, ctx: TaskContext) -> Subject:
        if self.text is not None:
            return Subject(None, self.text, self._record_sections(ctx))
        from agent_env.agents import find_reply

        reply = find_reply(ctx, str(self.prompt_id))
        if reply is None:
            raise StepError(f"no reply to prompt '{self.prompt_id}' is recorded")
        conversation = [t for t in reply.get("conversation") or [] if isinstance(t, dict)]
        response = str(reply.get("response") or "")
        if self.grade_up_to_turn is not None:
            conversation, response = self._cut(conversation, response)
        sections: list[tuple[str, str]] = []
        if self.use_trajectory:
            sections.append(("Agent trajectory", self._trajectory(ctx, reply)))
        if "conversation" in (self.run_context_for_judge or []):
            turns = conversation or [{"role": "user", "text": reply.get("prompt")},
                                     {"role": "agent", "text": response}]
            sections.append(("Conversation", "\n".join(
                f"{t.get('role')}: {t.get('text')}" for t in turns)))
        prompt = reply.get("prompt")
        return Subject(str(prompt) if prompt is not None else None, response,
                       (*sections, *self._record_sections(ctx)))

    def _record_sections(self, ctx: TaskContext) -> tuple[tuple[str, str], ...]:
        """The facts from the run's record, then the policy that says how to read them."""
        sections = []
        facts = self._facts(ctx)
        if facts:
            sections.append(("Context facts (measured from the run's record; trust them over "
                             "what the response claims)", facts))
        if self.grading_policy_prompt:
            sections.append(("Grading policy", self.grading_policy_prompt.strip()))
        return tuple(sections)

    def _cut(self, conversation: list[dict[str, Any]], response: str,
             ) -> tuple[list[dict[str, Any]], str]:
        """The conversation up to the agent's turn ``grade_up_to_turn``, and its reply then."""
        turn = int(self.grade_up_to_turn or 0)
        agent_turns = [i for i, t in enumerate(conversation) if t.get("role") == "agent"]
        if turn >= len(agent_turns):
            return conversation, response
        end = agent_turns[turn - 1]
        return conversation[:end + 1], str(conversation[end].get("text") or "")

    def _trajectory(self, ctx: TaskContext, reply: dict[str, Any]) -> str:
        from agent_env.runtime import current

        key = reply.get("agent_trajectory_object_key")
        if not key:
            raise StepError(f"use_trajectory: the agent kept no trajectory for prompt "
                            f"'{self.prompt_id}' (its card offers no trajectory extension)")
        try:
            events = json.loads(current().object_store.get(str(key)))
        except (KeyError, ValueError, OSError) as exc:
            raise StepError(f"use_trajectory: the trajectory of prompt '{self.prompt_id}' "
                            f"cannot be read ({exc})") from None
        return render_trajectory(events if isinstance(events, list) else [], self._flags(ctx))

    def _flags(self, ctx: TaskContext) -> dict[str, bool]:
        """What of the trajectory the judge reads: the step's filter over the default one;
        the run's ``--no-trajectory-filter`` shows it all, ``--apply-trajectory-filter`` the
        default when the step has none."""
        if ctx.choices.trajectory_filter is False:
            return dict.fromkeys(FILTER_FLAGS, True)
        return {**FILTER_FLAGS, **{k: v for k, v in (self.trajectory_filter or {}).items()
                                   if k in FILTER_FLAGS}}

    def _facts(self, ctx: TaskContext) -> str:
        if not self.context_facts_for_judge:
            return ""
        record = {**ctx.metadata, "task_id": ctx.task_id, "outputs": ctx.outputs,
                  "verifications": {k: v.to_json() for k, v in ctx.verifications.items()}}
        lines = []
        for label, path in self.context_facts_for_judge.items():
            try:
                value = json.dumps(lookup_fact(record, path), default=str, sort_keys=True)
            except KeyError:
                value = "(not available)"
            lines.append(f"- {label}: {value[:600]}")
        return "\n".join(lines)

    async def run(self, ctx: TaskContext) -> None:
        subject = self._subject(ctx)
        ask = await self._asker(ctx)
        size = self.judge_batch_size or 1
        batches = [list(range(i, min(i + size, len(self.criteria))))
                   for i in range(0, len(self.criteria), size)]
        limit = asyncio.Semaphore(self.judge_batch_concurrency or DEFAULT_BATCH_CONCURRENCY)

        async def grade(batch: list[int]) -> list[ScoreRow]:
            async with limit:
                if size == 1:
                    return [await self._grade_one(ask, subject, batch[0])]
                return await self._grade_batch(ask, subject, batch)

        graded = await asyncio.gather(*(grade(batch) for batch in batches))
        rows = [row for batch_rows in graded for row in batch_rows]
        ctx.record_verification(self, self.verifier_id, rows, self.score_aggregator)

    async def _grade_one(self, ask: Any, subject: Subject, index: int) -> ScoreRow:
        item = self.criteria[index]
        system = SYSTEM + (BINARY_NOTE if self.output_format == "rubric_binary" else "")
        content = await ask(system, f"Criterion: {item['criterion']}\n\n{subject.text()}")
        try:
            score, why = parse_judgement(content)
        except ValueError as exc:
            return self._error_row(index, f"the judge's answer is unusable ({exc})")
        return self._row(index, score, why)

    async def _grade_batch(self, ask: Any, subject: Subject, batch: list[int],
                           ) -> list[ScoreRow]:
        ids = [f"c{index + 1}" for index in batch]
        listed = json.dumps([{"id": cid, **{k: v for k, v in self.criteria[i].items()
                                            if k != "id"}}
                             for cid, i in zip(ids, batch, strict=True)], indent=1)
        system = BATCH_SYSTEM + (BINARY_NOTE if self.output_format == "rubric_binary" else "")
        content = await ask(system, f"Criteria:\n{listed}\n\n{subject.text()}")
        try:
            found = parse_batch(content, ids)
        except ValueError as exc:
            return [self._error_row(i, f"the judge's answer is unusable ({exc})") for i in batch]
        return [self._row(i, *found[cid]) if cid in found
                else self._error_row(i, f"the judge's answer has no result for {cid}")
                for cid, i in zip(ids, batch, strict=True)]

    def _row(self, index: int, score: float, why: str) -> ScoreRow:
        if self.output_format == "rubric_binary" and score not in (0, 1):
            return self._error_row(index, f"the judge scored {score:g}, not 0 or 1 "
                                          "(output_format rubric_binary)")
        item = self.criteria[index]
        return ScoreRow(index, score, score >= 1, why, weight=float(item.get("weight", 1)),
                        criterion=item)

    def _error_row(self, index: int, why: str) -> ScoreRow:
        item = self.criteria[index]
        return ScoreRow(index, 0.0, False, f"error: {why}", weight=float(item.get("weight", 1)),
                        criterion=item)

    # -- who judges ------------------------------------------------------------------------

    async def _asker(self, ctx: TaskContext) -> Any:
        """``ask(system, user) -> answer text``: a model call, or a prompt to the judge agent."""
        model = self._model(ctx)
        if self.use_agent_judge:
            agent = await self._judge_agent(ctx)
            return self._agent_asker(ctx, agent, model)
        if not model:
            raise StepError("the judge needs a model: set judge_model (or [model] roles.judge, "
                            "or [model] default), or run with --judge-model")
        from agent_env.models import chat

        extra = {"reasoning_effort": self.effort} if self.effort else {}

        async def ask(system: str, user: str) -> str:
            return await chat(ctx, str(model), [{"role": "system", "content": system},
                                                {"role": "user", "content": user}],
                              timeout=float(self.timeout_seconds), who="the judge", extra=extra,
                              role="judge")

        return ask

    def _judge_deploy_step(self) -> Step | str:
        """The ``deploy_agent`` step that brings this step's judge agent up, or why none can."""
        from agent_env.runtime import current
        from agent_env.tasks.steps import structure_step

        deploy = current().host.registry("step_type").get("deploy_agent")
        if deploy is None:
            return ("use_agent_judge: no plugin provides deploy_agent to bring a judge agent "
                    "up (install agentenv-agents), or set use_agent_judge: false")
        from agent_env.agents import JUDGE_ROLE

        raw: dict[str, Any] = {"id": f"{self.id}.judge", "agent_name": self.judge_name,
                               "role": JUDGE_ROLE}
        if self.judge_a2a_agent_id:
            raw["a2a_agent_id"] = self.judge_a2a_agent_id
        if self.judge_sandbox_type:
            raw["sandbox_type"] = self.judge_sandbox_type
        try:
            return structure_step(deploy, raw)
        except ValueError as exc:
            return f"use_agent_judge: the judge agent cannot be deployed ({exc})"

    @property
    def judge_name(self) -> str:
        return f"{JUDGE_AGENT_PREFIX}{self.id}"

    async def _judge_agent(self, ctx: TaskContext) -> Any:
        if self.agent_name is not None:
            agent = ctx.agents.get(self.agent_name)
            if agent is None:
                raise StepError(f"agent_name '{self.agent_name}': no agent of that name is "
                                "deployed (deploy it with a deploy_agent step before this one)")
            return agent
        if self.judge_name not in ctx.agents:
            deploy = self._judge_deploy_step()
            if isinstance(deploy, str):
                raise StepError(deploy)
            ctx.note(f"deploying the judge agent '{self.judge_name}'")
            await deploy.run(ctx)
        return ctx.agents[self.judge_name]

    def _agent_asker(self, ctx: TaskContext, agent: Any, model: str | None) -> Any:
        from agent_env.tasks.engine import step_of

        asked = 0

        async def ask(system: str, user: str) -> str:
            nonlocal asked
            asked += 1
            raw: dict[str, Any] = {"id": f"{self.id}.judge-{asked}", "agent_name": agent.name,
                                   "prompt": f"{system}\n\n{user}",
                                   "prompt_id": f"{self.id}.judge-{asked}",
                                   "timeout_seconds": self.timeout_seconds}
            for key, value in (("model", model), ("effort", self.effort),
                               ("max_thinking_tokens", self.max_thinking_tokens)):
                if value is not None:
                    raw[key] = value
            reply = await agent.prompt(step_of("prompt_agent", raw, "use_agent_judge"),
                                       float(self.timeout_seconds))
            if reply.error_type is not None:
                raise StepError(f"the judge agent '{agent.name}' failed ({reply.error_type}): "
                                f"{reply.error_message or 'no message'}")
            return str(reply.response)

        return ask
