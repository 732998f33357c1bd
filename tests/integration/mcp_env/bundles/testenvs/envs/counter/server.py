"""A counter with a data-plane reset: tests reset_env and the protocol checks."""

from agentenv_protocol import AgentEnvEnvironment, environment_card, reset_data, tool


@environment_card(name="counter")
class CounterEnv(AgentEnvEnvironment):
    def __init__(self) -> None:
        self.count = 0

    @tool(name="bump")
    def bump(self) -> str:
        """Add one and return the count."""
        self.count += 1
        return str(self.count)

    @reset_data
    async def reset(self) -> None:
        self.count = 0


if __name__ == "__main__":
    CounterEnv().serve()
