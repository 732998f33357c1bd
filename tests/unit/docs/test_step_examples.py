"""Every step type has an example in the generated step reference: one from a shipped bundle
(which ``agent-env run`` runs, in the bundle tests), else the class's own ``example``, which
must build as its class and pass its preflight checks, so the reference shows nothing that a
task could not say."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from agent_env.runtime import current
from agent_env.tasks.steps import PreflightView, structure_step

ROOT = Path(__file__).resolve().parents[3]


def reference() -> ModuleType:
    spec = importlib.util.spec_from_file_location("guide_reference",
                                                  ROOT / "docs" / "_gen" / "reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


REGISTRY = current().host.registry("step_type")


def _strings(value: Any) -> set[str]:
    if isinstance(value, str):
        return {value}
    if isinstance(value, dict):
        return set().union(*(_strings(v) for v in value.values()), set())
    if isinstance(value, list):
        return set().union(*(_strings(v) for v in value), set())
    return set()


def test_every_step_type_has_an_example() -> None:
    from_bundles = reference().bundle_examples(current().host)
    missing = sorted(name for name, cls in REGISTRY.items()
                     if name not in from_bundles and not getattr(cls, "example", None))
    assert missing == []


@pytest.mark.parametrize("name", sorted(n for n, c in REGISTRY.items()
                                        if getattr(c, "example", None)))
def test_a_class_example_builds_and_passes_preflight(name: str) -> None:
    cls = REGISTRY[name]
    example = dict(cls.example)
    assert example.pop("type") == name
    step = structure_step(cls, example)
    named = _strings(example)  # the ids it names exist in the task it would sit in
    view = PreflightView(step_ids=frozenset(named), entities={
        kind: frozenset(named) for kind in ("artifacts", "envs", "tasks", "evals", "agents")})
    assert step.check(view) == []


def test_the_reference_page_shows_them() -> None:
    page = reference().steps_page(current().host)
    assert page.count("```json") == len(REGISTRY)
    assert "From the shipped bundle `controls-demo`" in page
    assert "Example (checked by the docs tests):" in page
