"""``scripted_model``: make a bundle's script the scripted model ``scripted:<name>`` of a run.

A task names it before its prompts::

    {"id": "model", "type": "scripted_model", "script_artifact_id": "echo_script"}

The artifact holds one ``.json`` or ``.toml`` script (see :mod:`agentenv_agents.scripted`);
``name`` defaults to the artifact's name. A ``prompt_agent`` with ``"model":
"scripted:<name>"`` then gets its answers from that script, through the model gateway of the
agent's sandbox (the agent only ever sees the gateway). The script is loaded into every model
gateway of the run, those up now and those started later, so a judge
(``rubrics_verifier``) can name it too.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import attrs

from agent_env.api import PreflightView, Step, StepError

if TYPE_CHECKING:
    from agent_env.api import TaskContext

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


@attrs.define(kw_only=True)
class ScriptedModel(Step):
    """Register a script artifact as the scripted model ``scripted:<name>`` for this run."""

    type = "scripted_model"
    entity_fields = {"script_artifact_id": "artifacts"}

    script_artifact_id: str
    name: str | None = None

    @property
    def model_name(self) -> str:
        return self.name or self.script_artifact_id.rsplit("/", 1)[-1]

    def check(self, view: PreflightView) -> list[str]:
        problems = super().check(view)
        if not _NAME.match(self.model_name):
            problems.append(f"name '{self.model_name}' must be letters, digits, '.', '_', '-'")
        return problems

    async def run(self, ctx: TaskContext) -> None:
        from agentenv_agents.a2a_type import (
            load_run_scripts,
            parse_script,
            run_gateways,
            run_scripts,
        )

        artifact = await ctx.artifact(self.script_artifact_id)
        data = parse_script(artifact, self.model_name)
        scripts = run_scripts(ctx)
        if self.model_name in scripts:
            raise StepError(f"a scripted model named '{self.model_name}' is already set up "
                            "in this task")
        scripts[self.model_name] = data
        for handle in run_gateways(ctx):
            await load_run_scripts(ctx, handle)
        ctx.outputs[self.id] = {"model": f"scripted:{self.model_name}",
                                "script_artifact_id": artifact.id,
                                "turns": len(data.get("turns") or [])}
