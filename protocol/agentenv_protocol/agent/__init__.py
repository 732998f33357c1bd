"""The A2A agent SDK: write an agent as an ``AgentEnvAgent`` subclass and serve it over A2A 0.3.

```
@a2a_agent(identity=AgentIdentity(name="echo", description="repeats"), config=MyConfig,
           extensions=(MCP_CONFIG_V1, TRAJECTORY_V1))
class Echo(AgentEnvAgent):
    async def run(self, request: TaskRequest[MyConfig]) -> TaskResult:
        return TaskResult(text=request.text)

Echo().serve()          # or: create_app(Echo()) -> aiohttp.web.Application
```

Names load lazily (module ``__getattr__``), as in the top-level package: importing this package
costs nothing, and defining an agent does not load aiohttp until it serves.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what type checkers see; at runtime __getattr__ loads on first use
    from .app import create_app, serve
    from .cli_agent import CliAgent, CliAgentConfig, EpisodeAgent, cli_version, package_version
    from .cli_process import CliRun, PrestartedRun
    from .framework import (
        AGENT_CONFIG_V1,
        INSTALL_V1,
        MCP_CONFIG_V1,
        PEER_AGENTS_V1,
        SKILL_CONFIG_V1,
        SNAPSHOT_V1,
        TRAJECTORY_V1,
        TRIGGERS_V1,
        AgentEnvAgent,
        AgentSpec,
        a2a_agent,
    )
    from .models import (
        AgentConfig,
        AgentIdentity,
        AgentSkill,
        Artifact,
        McpServer,
        Progress,
        TaskRequest,
        TaskResult,
        Usage,
        write_only,
    )
    from .skills import Skill, write_skills
    from .trajectory import TrajectoryWriter

_EXPORTS = {
    "AgentEnvAgent": "framework",
    "a2a_agent": "framework",
    "AgentSpec": "framework",
    "AGENT_CONFIG_V1": "framework",
    "MCP_CONFIG_V1": "framework",
    "TRAJECTORY_V1": "framework",
    "SKILL_CONFIG_V1": "framework",
    "SNAPSHOT_V1": "framework",
    "TRIGGERS_V1": "framework",
    "PEER_AGENTS_V1": "framework",
    "INSTALL_V1": "framework",
    "Skill": "skills",
    "write_skills": "skills",
    "AgentIdentity": "models",
    "AgentSkill": "models",
    "AgentConfig": "models",
    "write_only": "models",
    "McpServer": "models",
    "Usage": "models",
    "Progress": "models",
    "Artifact": "models",
    "TaskResult": "models",
    "TaskRequest": "models",
    "TrajectoryWriter": "trajectory",
    "CliRun": "cli_process",
    "CliAgent": "cli_agent",
    "CliAgentConfig": "cli_agent",
    "cli_version": "cli_agent",
    "EpisodeAgent": "cli_agent",
    "package_version": "cli_agent",
    "PrestartedRun": "cli_process",
    "create_app": "app",
    "serve": "app",
}

__all__ = [
    "AGENT_CONFIG_V1",
    "INSTALL_V1",
    "MCP_CONFIG_V1",
    "PEER_AGENTS_V1",
    "SKILL_CONFIG_V1",
    "SNAPSHOT_V1",
    "TRAJECTORY_V1",
    "TRIGGERS_V1",
    "AgentConfig",
    "AgentEnvAgent",
    "AgentIdentity",
    "AgentSkill",
    "AgentSpec",
    "Artifact",
    "CliAgent",
    "CliAgentConfig",
    "CliRun",
    "EpisodeAgent",
    "McpServer",
    "PrestartedRun",
    "Progress",
    "Skill",
    "TaskRequest",
    "TaskResult",
    "TrajectoryWriter",
    "Usage",
    "a2a_agent",
    "cli_version",
    "create_app",
    "package_version",
    "serve",
    "write_only",
    "write_skills",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'agentenv_protocol.agent' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
