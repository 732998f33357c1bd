"""A todo list env: items to add, list and complete; ``data/reset`` empties the list, and
``data/get`` / ``data/add`` give and take the items, so a group of episodes can fork from one
warmed list (``EpisodeSpec.start_group``).

Each item remembers the role that added it, so a verifier can tell that the agent's calls came
through the gateway as the agent's role.
"""

from agentenv_protocol import (
    AgentEnvEnvironment,
    AgentEnvError,
    DataPart,
    ToolContext,
    add_data,
    environment_card,
    get_data,
    reset_data,
    tool,
)


@environment_card(name="todo", description="A todo list: add, list and complete items.")
class TodoEnv(AgentEnvEnvironment):
    def __init__(self) -> None:
        self.items = []

    @tool(name="add_item")
    def add_item(self, text: str, context: ToolContext) -> dict:
        """Add an item to the list; answers the item."""
        item = {"id": len(self.items) + 1, "text": text, "done": False,
                "added_by": context.role or "default"}
        self.items.append(item)
        return item

    @tool(name="list_items")
    def list_items(self) -> dict:
        """Every item, and how many are still open."""
        return {"items": self.items, "open": sum(1 for i in self.items if not i["done"])}

    @tool(name="complete_item")
    def complete_item(self, item_id: int) -> dict:
        """Mark the item with this id done."""
        for item in self.items:
            if item["id"] == item_id:
                item["done"] = True
                return item
        raise AgentEnvError("not_found", f"no item has id {item_id}")

    @get_data
    def dump(self) -> list:
        return [DataPart({"items": self.items})]

    @add_data
    def load(self, parts: list) -> None:
        for part in parts:
            self.items.extend(part.data["items"])

    @reset_data
    async def reset(self) -> None:
        self.items = []


if __name__ == "__main__":
    TodoEnv().serve()
