"""The digest service: summarises the notes it reads from the notes service, which it reaches by
name on the env's private network (``env-notes``), not through the gateway."""

import os

from agentenv_protocol import AgentEnvEnvironment, DataPlaneClient, environment_card, tool

NOTES_URL = os.environ.get("NOTES_URL", "http://env-notes:18765")


@environment_card(name="digest")
class DigestEnv(AgentEnvEnvironment):
    @tool(name="digest")
    async def digest(self) -> str:
        """How many notes there are, and the longest."""
        async with DataPlaneClient(NOTES_URL) as notes:
            texts = [part.text for part in await notes.get()]
        if not texts:
            return "no notes"
        return f"{len(texts)} notes; the longest: {max(texts, key=len)}"


if __name__ == "__main__":
    DigestEnv().serve()
