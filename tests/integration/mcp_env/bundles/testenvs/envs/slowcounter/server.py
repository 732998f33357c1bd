"""A counter whose tool reads, waits, then writes: two calls side by side lose an update, two
calls one at a time do not. Tests the gateway's ``consistent`` mode."""

import asyncio

from agentenv_protocol import AgentEnvEnvironment, environment_card, tool


@environment_card(name="slowcounter")
class SlowCounterEnv(AgentEnvEnvironment):
    def __init__(self) -> None:
        self.count = 0

    @tool(name="slow_bump")
    async def slow_bump(self) -> str:
        """Add one, slowly, and return the count."""
        seen = self.count
        await asyncio.sleep(0.5)
        self.count = seen + 1
        return str(self.count)


if __name__ == "__main__":
    SlowCounterEnv().serve()
