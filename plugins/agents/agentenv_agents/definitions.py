"""Agent definitions: the folders plugins ship through ``agent_env_agents``, read on use.

An agent folder holds an ``agent.toml`` and what its type needs (a Dockerfile for ``a2a``). The
common keys below are read here (into the kernel's ``AgentDefinition``); the agent type
(``agent_env_agent_types``) reads the rest of the folder. Keys follow the reference's
``agent.toml``: ``image`` (a prebuilt image instead of building the folder), ``[default_env_vars]``,
``[metadata]`` (``default_model``, ``min_disk_size_gb``, ``takes_credentials``); ``type`` is ours
(default ``a2a``). A folder with a Dockerfile and no ``agent.toml`` (as the reference's agent
folders are) is an ``a2a`` agent with every default."""

from __future__ import annotations

from pathlib import Path

from agent_env.api import (
    AGENT_FILE,
    DEFAULT_AGENT_TYPE,
    AgentDefinition,
    UserError,
    read_toml,
)

KNOWN_KEYS = {"type", "image", "dockerfile", "description", "default_env_vars", "metadata",
              "config"}
KNOWN_METADATA = {"default_model", "min_disk_size_gb", "takes_credentials"}


def read_agent(name: str, folder: Path) -> AgentDefinition:
    """Read ``folder/agent.toml``; a UserError names the file and what to fix."""
    path = folder / AGENT_FILE
    if not path.is_file():
        if (folder / "Dockerfile").is_file():
            return AgentDefinition(name=name, folder=folder)
        raise UserError(f"agent '{name}' has no {AGENT_FILE} (nor a Dockerfile) in {folder}")
    data = read_toml(path)
    unknown = sorted(set(data) - KNOWN_KEYS)
    if unknown:
        raise UserError(f"{path}: unknown key(s) {', '.join(unknown)} "
                        f"(known: {', '.join(sorted(KNOWN_KEYS))})")
    metadata = data.get("metadata", {})
    if not isinstance(metadata, dict) or set(metadata) - KNOWN_METADATA:
        raise UserError(f"{path}: [metadata] takes only {', '.join(sorted(KNOWN_METADATA))}")
    env = data.get("default_env_vars", {})
    if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
        raise UserError(f"{path}: [default_env_vars] must map names to strings")
    for key in ("type", "image", "dockerfile", "description"):
        if key in data and not isinstance(data[key], str):
            raise UserError(f"{path}: '{key}' must be a string")
    config = data.get("config", {})
    if not isinstance(config, dict):
        raise UserError(f"{path}: [config] must be a table")
    return AgentDefinition(
        name=name, folder=folder, type=data.get("type", DEFAULT_AGENT_TYPE),
        image=data.get("image"), dockerfile=data.get("dockerfile", "Dockerfile"),
        description=data.get("description", ""), default_env_vars=dict(env),
        metadata=dict(metadata), config=dict(config),
    )


def pinned(definition: AgentDefinition) -> list[str]:
    """What the agent's image pins, for ``a2a-agent list``: ``ARG <NAME>_VERSION=<v>`` lines of
    its Dockerfile (``claude-code 2.1.332``) and ``name==version`` lines of its
    requirements.txt. An image given by reference pins itself: its ref."""
    import re

    if definition.image:
        return [str(definition.image)]
    found: list[str] = []
    dockerfile = definition.folder / definition.dockerfile
    if dockerfile.is_file():
        for line in dockerfile.read_text(encoding="utf-8", errors="replace").splitlines():
            match = re.match(r"\s*ARG\s+([A-Z0-9_]+)_VERSION=(\S+)", line)
            if match:
                found.append(f"{match.group(1).lower().replace('_', '-')} {match.group(2)}")
    requirements = definition.folder / "requirements.txt"
    if requirements.is_file():
        for line in requirements.read_text(encoding="utf-8", errors="replace").splitlines():
            match = re.match(r"\s*([A-Za-z0-9._-]+)\s*==\s*([^\s;#]+)", line)
            if match:
                found.append(f"{match.group(1)} {match.group(2)}")
    return found
