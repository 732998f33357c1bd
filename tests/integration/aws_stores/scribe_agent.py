"""An SDK agent with a workspace, for the snapshot/v1 tests: each prompt becomes a trajectory
event and a file ``notes/<prompt>.txt`` in its workspace folder. For the changelog, each word
of a prompt is a "tool call" ending in ``request.checkpoint()``: ``-word`` removes
``notes/word.txt``, any other word writes ``notes/word.txt``."""

from __future__ import annotations

from pathlib import Path

import aiohttp

from agentenv_protocol.agent import (
    AgentConfig,
    AgentEnvAgent,
    AgentIdentity,
    TaskRequest,
    TaskResult,
    a2a_agent,
)


@a2a_agent(identity=AgentIdentity(name="scribe", description="Writes each prompt to a file."),
           extensions=("trajectory", "snapshot"))
class ScribeAgent(AgentEnvAgent):
    def __init__(self, workspace: Path | None) -> None:
        self.workspace = str(workspace) if workspace else None

    async def run(self, request: TaskRequest[AgentConfig]) -> TaskResult:
        request.trajectory.set_format("scribe/1")
        request.trajectory.append({"type": "prompt", "text": request.text})
        words = request.text.split()
        for word in words if len(words) > 1 else []:
            request.trajectory.append({"type": "tool_call", "word": word})
            if self.workspace:
                notes = Path(self.workspace) / "notes"
                notes.mkdir(parents=True, exist_ok=True)
                if word.startswith("-"):
                    (notes / f"{word[1:]}.txt").unlink()
                else:
                    (notes / f"{word}.txt").write_text(word)
            await request.checkpoint()
        if self.workspace and len(words) <= 1:
            notes = Path(self.workspace) / "notes"
            notes.mkdir(parents=True, exist_ok=True)
            (notes / f"{request.text}.txt").write_text(request.text)
        return TaskResult(text="noted")


async def send(http: aiohttp.ClientSession, url: str, text: str, context_id: str) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {
        "message": {"messageId": text, "role": "user", "kind": "message", "contextId": context_id,
                    "parts": [{"kind": "text", "text": text}]},
        "configuration": {"blocking": True}}}
    async with http.post(url + "/a2a", json=body) as resp:
        assert (await resp.json())["result"]["status"]["state"] == "completed"
