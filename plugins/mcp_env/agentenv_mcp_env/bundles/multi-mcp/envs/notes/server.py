"""The notes service: keeps notes; its data plane hands them to whoever asks (the digest)."""

from agentenv_protocol import AgentEnvEnvironment, TextPart, environment_card, get_data, tool


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


if __name__ == "__main__":
    NotesEnv().serve()
