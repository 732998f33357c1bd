"""The echo env: one tool that sends its text back."""

from agentenv_protocol import AgentEnvEnvironment, environment_card, tool


@environment_card(name="echo", description="Sends text back; the smallest MCP env.")
class EchoEnv(AgentEnvEnvironment):
    @tool(name="echo")
    def echo(self, text: str) -> str:
        """Send the text back."""
        return text


if __name__ == "__main__":
    EchoEnv().serve()
