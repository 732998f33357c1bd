"""A ledger of entries kept in memory, with a faithful data plane: ``data/get`` answers the
entries, ``data/add`` takes that answer back, ``data/reset`` empties it. Forks over the data
plane."""

from agentenv_protocol import (
    AgentEnvEnvironment,
    DataPart,
    add_data,
    environment_card,
    get_data,
    reset_data,
    tool,
)


@environment_card(name="ledger", description="A ledger: add entries and read them.")
class LedgerEnv(AgentEnvEnvironment):
    def __init__(self) -> None:
        self.entries: list[str] = []

    @tool(name="add_entry")
    def add_entry(self, text: str) -> dict:
        """Add an entry; answers every entry."""
        self.entries.append(text)
        return {"entries": self.entries}

    @tool(name="entries")
    def list_entries(self) -> dict:
        """Every entry, oldest first."""
        return {"entries": self.entries}

    @add_data
    def load(self, parts: list) -> None:
        for part in parts:
            self.entries.extend(part.data["entries"])

    @get_data
    def dump(self) -> list:
        return [DataPart({"entries": self.entries})]

    @reset_data
    def reset(self) -> None:
        self.entries = []


if __name__ == "__main__":
    LedgerEnv().serve()
