"""A second env with its own tool: deployed with counter behind one gateway (with_envs)."""

from agentenv_protocol import AgentEnvEnvironment, environment_card, tool


@environment_card(name="greeter")
class GreeterEnv(AgentEnvEnvironment):
    @tool(name="greet")
    def greet(self, name: str) -> str:
        """Say hello to ``name``."""
        return f"hello {name}"


if __name__ == "__main__":
    GreeterEnv().serve()
