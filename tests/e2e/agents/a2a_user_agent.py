"""A conversation's user, served over A2A with the agent SDK: ``python a2a_user_agent.py PORT``.

It asks a follow-up question after the agent's first answer and ends the conversation after the
second, answering in the ``{"message", "done"}`` shape a user's turn may take; every line it was
sent is appended to the file named by ``USER_AGENT_LOG`` (what the test checks it saw)."""

from __future__ import annotations

import json
import os
import sys

from aiohttp import web

from agentenv_protocol.agent import AgentEnvAgent, AgentIdentity, TaskRequest, TaskResult, a2a_agent
from agentenv_protocol.agent.app import create_app


@a2a_agent(identity=AgentIdentity(name="a2a-user", description="Plays a conversation's user."))
class UserAgent(AgentEnvAgent):
    def __init__(self) -> None:
        self.turns = 0

    async def run(self, request: TaskRequest) -> TaskResult:
        self.turns += 1
        with open(os.environ["USER_AGENT_LOG"], "a", encoding="utf-8") as log:
            log.write(json.dumps({"text": request.text, "context": request.context_id}) + "\n")
        if self.turns == 1:
            said = {"message": "Thanks. And what is 7 * 7?", "done": False}
        else:
            said = {"message": "That is all I needed.", "done": True}
        return TaskResult(text=json.dumps(said))


if __name__ == "__main__":
    web.run_app(create_app(UserAgent()), host="127.0.0.1", port=int(sys.argv[1]),
                print=None)
