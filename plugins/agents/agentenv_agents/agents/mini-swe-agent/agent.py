"""mini-swe-agent as an A2A agent: its own agent loop (``DefaultAgent``, one ``bash`` tool), run
once per prompt in a process of its own.

Built on AgentEnv's A2A agent SDK. Each prompt gets its own ``python agent.py --episode``
process, the job on its stdin, started one prompt ahead so its imports are done when the prompt
comes (:class:`~agentenv_protocol.agent.PrestartedRun`); that process runs mini-swe-agent's
``DefaultAgent`` with its shipped ``mini.yaml`` templates, a ``LitellmModel`` pointed at the
run's model gateway (``openai/<model>`` at ``AGENTENV_MODEL_BASE_URL`` with the per-run token:
no provider key is ever in this container) and a ``LocalEnvironment`` in the agent's work
folder, and prints every message the loop adds as one JSON line. The envs' MCP tools
(``/ext/mcp-config``) are the SDK's ``mcp-call`` command
(:mod:`agentenv_protocol.agent.mcp_call`), which the prompt tells the model about;
mini-swe-agent has no MCP client.

The reply is the agent's submission: what follows ``COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT`` in
the output of its last command. Any other end (a step limit, repeated format errors, an
exception) fails the turn (``agent_error``) with mini-swe-agent's exit status and the process's
last stderr lines; a cancelled prompt kills the process group.

Trajectory (format ``mini-swe-agent/1``): an ``agentenv.cli`` event, then every message
(``mini.message``: role, content, the assistant's tool calls and the actions parsed from them,
the tool results), then ``mini.exit`` (exit status, submission). Usage counts one tool call per
bash action and the model's token counts.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from agentenv_protocol.agent import (
    AGENT_CONFIG_V1,
    MCP_CONFIG_V1,
    TRAJECTORY_V1,
    AgentIdentity,
    CliAgentConfig,
    EpisodeAgent,
    TaskRequest,
    TaskResult,
    a2a_agent,
    package_version,
)

TRAJECTORY_FORMAT = "mini-swe-agent/1"
#: What the model reads, after the task, when the agent has envs: its tools are a command.
TOOLS_NOTE = (
    "\n\nThe tools of your environment are the `mcp-call` command: `mcp-call list` lists them "
    "with their input schemas, and `mcp-call TOOL '<JSON arguments>'` calls one and prints "
    "its result."
)


@a2a_agent(
    identity=AgentIdentity(name="mini-swe-agent", version=package_version("mini-swe-agent"),
                           description="mini-swe-agent (one bash tool) with its envs' tools "
                                       "as the mcp-call command."),
    config=CliAgentConfig,
    extensions=(AGENT_CONFIG_V1, MCP_CONFIG_V1, TRAJECTORY_V1),
)
class MiniSweAgent(EpisodeAgent):
    trajectory_format = TRAJECTORY_FORMAT
    cli_name = "mini-swe-agent"
    code_prefix = "mini"
    version = package_version("mini-swe-agent")

    async def run(self, request: TaskRequest[CliAgentConfig]) -> TaskResult:
        model = self.model_for(request)
        if model is None:
            return self.no_model()
        trajectory = request.trajectory
        job = {"task": request.text + (TOOLS_NOTE if request.mcp_servers else ""),
               "model": model, "base_url": self.base_url,
               "system_prompt": request.config.system_prompt,
               "step_limit": self.max_turns(request),
               "cwd": str(self.workdir)}
        self.begin(request, self.process.args, model=model)
        ended: dict[str, Any] | None = None
        async with await self.start_episode(request, job) as run:
            async for event in run.events():
                trajectory.append(event)
                if event.get("type") == "mini.message" and event.get("role") == "assistant":
                    for _ in event.get("actions") or ():
                        request.usage.add_tool_call()
                    usage = event.get("usage") or {}
                    request.usage.add_tokens(
                        input_tokens=int(usage.get("prompt_tokens") or 0),
                        output_tokens=int(usage.get("completion_tokens") or 0))
                elif event.get("type") == "mini.exit":
                    ended = event
            code = await run.wait()
        if ended is None or code != 0:
            return self.ended_early(code, run)
        status = str(ended.get("exit_status") or "")
        if status != "Submitted":
            why = str(ended.get("exception_str") or ended.get("content") or "").strip()
            return TaskResult.failure(f"mini-swe-agent stopped without submitting: {status}"
                                      + (f": {why[:500]}" if why else ""),
                                      code="mini.not_submitted")
        answer = str(ended.get("submission") or "").strip()
        if not answer:
            return TaskResult.failure("mini-swe-agent submitted no text",
                                      code="mini.empty_answer")
        return TaskResult(text=answer)


def _slim(message: dict[str, Any]) -> dict[str, Any]:
    """A message as the trajectory keeps it: without the model's whole raw response."""
    extra = message.get("extra") or {}
    response = extra.get("response") if isinstance(extra.get("response"), dict) else {}
    kept = {k: message[k] for k in ("role", "content", "tool_calls", "tool_call_id")
            if message.get(k) is not None}
    kept.update({k: extra[k] for k in ("actions", "exit_status", "submission",
                                       "exception_str", "interrupt_type") if k in extra})
    if response.get("usage"):
        kept["usage"] = response["usage"]
    return {"type": "mini.message", **kept}


def episode() -> int:
    """The prompt's process: one mini-swe-agent run of the job on stdin, JSON lines out. It
    imports mini-swe-agent and litellm (seconds) before it reads the job, so a process started
    ahead of its prompt (:class:`PrestartedRun`) has done that by the time the prompt comes."""
    import litellm  # noqa: F401  (imported on the first model call otherwise)
    import yaml
    from minisweagent import package_dir
    from minisweagent.agents.default import DefaultAgent
    from minisweagent.environments.local import LocalEnvironment
    from minisweagent.models.litellm_model import LitellmModel

    job = json.load(sys.stdin)
    config = yaml.safe_load((Path(package_dir) / "config" / "mini.yaml").read_text())["agent"]
    if job.get("system_prompt"):
        config["system_template"] = job["system_prompt"]
    config.update(step_limit=int(job["step_limit"]), cost_limit=0)

    class Streaming(DefaultAgent):
        def add_messages(self, *messages: dict[str, Any]) -> list[dict[str, Any]]:
            for message in messages:
                print(json.dumps(_slim(message), default=str), flush=True)
            return super().add_messages(*messages)

    model = LitellmModel(model_name=f"openai/{job['model']}", cost_tracking="ignore_errors",
                         model_kwargs={"api_base": job["base_url"],
                                       "api_key": os.environ.get("AGENTENV_MODEL_TOKEN", "")})
    agent = Streaming(model, LocalEnvironment(cwd=job["cwd"]), **config)
    try:
        result = agent.run(job["task"])
    except Exception as exc:  # its exit message was added (and printed) already
        result = {"exit_status": type(exc).__name__, "exception_str": str(exc)}
    print(json.dumps({"type": "mini.exit", **result}, default=str), flush=True)
    return 0


if __name__ == "__main__":
    MiniSweAgent.main(episode)
