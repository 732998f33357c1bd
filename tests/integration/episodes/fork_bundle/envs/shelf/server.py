"""A shelf of entries kept as files (one per entry, in ``~/shelf``), with no data plane: forks by
image commit, which saves files."""

import os
from pathlib import Path

from agentenv_protocol import AgentEnvEnvironment, environment_card, tool

SHELF = Path(os.path.expanduser("~/shelf"))


def entries() -> list[str]:
    if not SHELF.is_dir():
        return []
    return [p.read_text() for p in sorted(SHELF.iterdir(), key=lambda p: int(p.name))]


@environment_card(name="shelf", description="A shelf: add entries and read them.")
class ShelfEnv(AgentEnvEnvironment):
    @tool(name="add_entry")
    def add_entry(self, text: str) -> dict:
        """Add an entry; answers every entry."""
        SHELF.mkdir(exist_ok=True)
        (SHELF / str(len(entries()) + 1)).write_text(text)
        return {"entries": entries()}

    @tool(name="entries")
    def list_entries(self) -> dict:
        """Every entry, oldest first."""
        return {"entries": entries()}


if __name__ == "__main__":
    ShelfEnv().serve()
