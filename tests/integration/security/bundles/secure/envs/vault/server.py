"""An env whose one tool must only be reached through the gateway (the token-bypass tests)."""

from agentenv_protocol import AgentEnvEnvironment, environment_card, tool


@environment_card(name="vault")
class VaultEnv(AgentEnvEnvironment):
    @tool(name="open_vault")
    def open_vault(self) -> str:
        """What only a token holder should get."""
        return "opened"


if __name__ == "__main__":
    VaultEnv().serve()
