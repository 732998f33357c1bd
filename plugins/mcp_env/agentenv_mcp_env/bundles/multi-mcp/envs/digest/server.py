"""The digest service: summarises the notes it reads from the notes service, which it reaches by
name on the env's private network (``env-notes``), not through the gateway. A seed
(``digest.json``: ``{"heading": ...}``) sets the heading its summaries start with."""

import json
import os

from agentenv_protocol import (
    AgentEnvEnvironment,
    DataPlaneClient,
    add_data,
    environment_card,
    reset_data,
    tool,
)

NOTES_URL = os.environ.get("NOTES_URL", "http://env-notes:18765")


@environment_card(name="digest")
class DigestEnv(AgentEnvEnvironment):
    def __init__(self) -> None:
        self.heading = ""

    @tool(name="digest")
    async def digest(self) -> str:
        """How many notes there are, and the longest."""
        async with DataPlaneClient(NOTES_URL) as notes:
            texts = [part.text for part in await notes.get()]
        if not texts:
            return f"{self.heading}no notes"
        return f"{self.heading}{len(texts)} notes; the longest: {max(texts, key=len)}"

    @reset_data
    def plain(self) -> None:
        self.heading = ""

    @add_data
    def seed(self, parts: list) -> None:
        for part in parts:
            if part.kind == "file":
                self.heading = str(json.loads(part.file.read())["heading"]) + ": "


if __name__ == "__main__":
    DigestEnv().serve()
