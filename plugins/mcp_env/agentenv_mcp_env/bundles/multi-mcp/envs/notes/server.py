"""The notes service: keeps notes; its data plane hands them to whoever asks (the digest), and
takes a seed (``notes.json``, a list of notes) from an environment artifact."""

import json

from agentenv_protocol import (
    AgentEnvEnvironment,
    TextPart,
    add_data,
    environment_card,
    get_data,
    reset_data,
    tool,
)


@environment_card(name="notes")
class NotesEnv(AgentEnvEnvironment):
    def __init__(self) -> None:
        self.notes: list[str] = []

    @tool(name="add_note")
    def add_note(self, text: str) -> str:
        """Keep a note."""
        self.notes.append(text)
        return f"{len(self.notes)} notes"

    @get_data
    def notes_now(self) -> list:
        """data/get: one text part per note."""
        return [TextPart(note) for note in self.notes]

    @reset_data
    def forget(self) -> None:
        self.notes = []

    @add_data
    def seed(self, parts: list) -> None:
        """data/add: a file part holding a JSON list of notes (from /data, or inline)."""
        for part in parts:
            if part.kind == "file":
                self.notes.extend(str(n) for n in json.loads(part.file.read()))


if __name__ == "__main__":
    NotesEnv().serve()
