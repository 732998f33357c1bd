"""An env whose tool name clashes with counter's: deployed with it, the deploy is refused."""

from agentenv_protocol import AgentEnvEnvironment, environment_card, tool


@environment_card(name="bumper")
class BumperEnv(AgentEnvEnvironment):
    @tool(name="bump")
    def bump(self) -> str:
        """Also called bump."""
        return "bumped"


if __name__ == "__main__":
    BumperEnv().serve()
