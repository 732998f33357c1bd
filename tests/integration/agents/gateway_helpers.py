"""What the model gateway tests share: the run token, the script, SDK clients on a gateway."""

from __future__ import annotations

from typing import Any

import anthropic
import openai

from agentenv_agents.model_gateway import ModelGateway

TOKEN = "run-token-0123456789"

#: A small agent conversation: look, read a file, check what came back, finish.
SCRIPT: dict[str, Any] = {
    "name": "fix-bug",
    "turns": [
        {"text": "Let me look at the file."},
        {"tool_calls": [{"name": "read_file", "arguments": {"path": "app.py"}}]},
        {"match": {"last_tool_result_contains": "def main"},
         "text": "Found main, fixing it.",
         "tool_calls": [{"name": "write_file",
                         "arguments": {"path": "app.py", "text": "def main(): pass"}}]},
        {"text": "Done: main is fixed."},
    ],
}


def openai_client(gateway: ModelGateway, token: str = TOKEN) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=f"{gateway.url}/v1", api_key=token, max_retries=0)


def anthropic_client(gateway: ModelGateway, token: str = TOKEN) -> anthropic.AsyncAnthropic:
    return anthropic.AsyncAnthropic(base_url=gateway.url, api_key=token, max_retries=0)
