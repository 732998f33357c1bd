"""An env written exactly as the reference framework's users write it (protocol.md section 7).

Kept verbatim-in-spirit on purpose: it must run unchanged on our SDK. Run it directly with
``python reference_style_env.py`` (binds MCP_HOST/MCP_PORT) or import ``EchoEnv`` in tests.
"""

from typing import Annotated

from pydantic import Field

from agentenv_protocol import (
    AgentEnvEnvironment,
    AgentEnvError,
    add_data,
    environment_card,
    extension,
    get_data,
    reset_data,
    tool,
)


@environment_card(name="echo")
class EchoEnv(AgentEnvEnvironment):
    def __init__(self) -> None:
        self.notes: list = []

    @tool(name="echo")
    def echo(self, text: Annotated[str, Field(description="The text to send back.")]) -> str:
        """Send the text back."""
        return text

    @tool(name="{environment_name}_count", description="How many notes were added.")
    async def count(self) -> int:
        return len(self.notes)

    @tool(name="fail_politely")
    def fail_politely(self, reason: Annotated[str, Field(description="Why.")] = "no reason") -> str:
        raise AgentEnvError("not_today", reason, retryable=True, hint="try tomorrow")

    @reset_data
    async def reset(self) -> None:
        self.notes.clear()

    @add_data
    async def add(self, parts) -> None:
        self.notes.extend(parts)

    @get_data
    async def get(self):
        return self.notes

    @extension("urn:agentenv:clock/v1")
    async def sync_time(self, env_get_time_url: str) -> dict:
        """Remember where the gateway serves virtual time."""
        self.time_url = env_get_time_url
        return {"ok": True}


if __name__ == "__main__":
    EchoEnv().serve()
