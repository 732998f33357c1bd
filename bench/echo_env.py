"""A one-tool env server for the protocol benchmark (run as a script: MCP_HOST/MCP_PORT)."""

from agentenv_protocol import AgentEnvEnvironment, environment_card, tool


@environment_card(name="bench-echo")
class BenchEcho(AgentEnvEnvironment):
    @tool()
    def echo(self, text: str) -> str:
        """Return the text unchanged."""
        return text


if __name__ == "__main__":
    BenchEcho().serve()
