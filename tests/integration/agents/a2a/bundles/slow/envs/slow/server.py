"""A test env whose one tool takes as long as it is told: an agent calling it is busy."""

import asyncio

from agentenv_protocol import AgentEnvEnvironment, environment_card, tool


@environment_card(name="slow", description="Waits, then answers.")
class SlowEnv(AgentEnvEnvironment):
    @tool(name="wait")
    async def wait(self, seconds: float) -> str:
        """Wait ``seconds``, then say so."""
        await asyncio.sleep(seconds)
        return f"waited {seconds}"


if __name__ == "__main__":
    SlowEnv().serve()
