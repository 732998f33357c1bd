"""A front desk: tells the time (the gateway's virtual clock, once a task arms it), files
reports, keeps a visitors' book (``visitors`` reads it); with set-errors/v1 (InjectsFaults) a
task can make a tool flaky on purpose."""

import json
import urllib.request

from agentenv_protocol import (
    AgentEnvEnvironment,
    InjectsFaults,
    TextPart,
    add_data,
    environment_card,
    extension,
    get_data,
    reset_data,
    tool,
)


@environment_card(name="desk")
class DeskEnv(InjectsFaults, AgentEnvEnvironment):
    def __init__(self) -> None:
        self.time_url = None
        self.visitors: list[str] = []

    @extension("urn:agentenv:clock/v1")
    def sync_time(self, env_get_time_url: str) -> None:
        self.time_url = env_get_time_url

    @tool(name="what_time")
    def what_time(self) -> str:
        """The time here (virtual, once the task set the clock)."""
        if self.time_url is None:
            return "wall clock"
        with urllib.request.urlopen(self.time_url, timeout=5) as reply:
            return json.load(reply)["virtual_time"]

    @tool(name="sign_in")
    def sign_in(self, name: str) -> str:
        """Write a visitor into the book."""
        self.visitors.append(name)
        return f"{len(self.visitors)} visitors"

    @tool(name="visitors")
    def list_visitors(self) -> list:
        """Who is in the visitors' book."""
        return list(self.visitors)

    @tool(name="file_report")
    def file_report(self) -> str:
        """File the day's report (managers only, once a task locks it)."""
        return "filed"

    @get_data
    def book(self) -> list:
        return [TextPart(name) for name in self.visitors]

    @reset_data
    def clear(self) -> None:
        self.visitors = []

    @add_data
    def restore(self, parts: list) -> None:
        self.visitors += [part.text for part in parts]


if __name__ == "__main__":
    DeskEnv().serve()
