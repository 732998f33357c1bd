"""The A2A validators at preflight: bad probes and aggregators are named before anything runs."""

from __future__ import annotations

from agent_env.api import PreflightView
from agentenv_agents.a2a_validators import VerifyA2aModalities, VerifyA2aRole

VIEW = PreflightView(step_ids=frozenset({"v", "ask"}))


def test_modality_probes_are_checked() -> None:
    good = VerifyA2aModalities(id="v", probes=[
        {"modality": "text", "prompt_id": "ask", "expected": "PINEAPPLE"}])
    assert good.check(VIEW) == []
    problems = VerifyA2aModalities(id="v", probes=[
        {"modality": "image/png", "prompt_id": "nope", "expected": "red"},
        {"modality": "text"}]).check(VIEW)
    assert problems == [
        "probes[0]: prompt_id 'nope' is no step of this task (name the prompt_agent that sent "
        "the probe)",
        "probes[1] lacks prompt_id, expected"]
    assert VerifyA2aModalities(id="v", probes=[]).check(VIEW) == [
        "probes must list at least one {modality, prompt_id, expected}"]


def test_an_unknown_aggregator_is_named() -> None:
    problems = VerifyA2aRole(id="v", score_aggregator="mean").check(VIEW)
    assert problems and "score_aggregator 'mean' is not known" in problems[0]
