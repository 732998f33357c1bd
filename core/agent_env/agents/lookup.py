"""Finding an agent by id: an installed one (a plugin's ``agent_env_agents``), else one that
``a2a-agent put`` stored. Its own module because it reads both the folder format
(:mod:`agent_env.agents`) and the store (:mod:`agent_env.agents.stored`), which the store's
module itself builds on."""

from __future__ import annotations

from pathlib import Path

from agent_env.agents import AgentDefinition, read_agent
from agent_env.agents.stored import installed_agent, load_stored_agent, stored_record
from agent_env.errors import UserError


def find_agent(agent_id: str, version: int | None = None) -> AgentDefinition:
    """The installed agent ``agent_id`` (name or alias), else the one ``a2a-agent put`` stored
    (``version``, default the latest), read; MissingPluginError when neither has it.

    Installed agents have no versions: ``version`` applies to stored ones (``put`` refuses an
    installed agent's id, so an id is never both)."""
    source = installed_agent(agent_id)
    if source is not None:
        return read_agent(source.name, Path(source.path))
    record = stored_record(agent_id, version)
    if record is not None:
        return load_stored_agent(record)
    raise _missing_agent(agent_id)


def _missing_agent(agent_id: str) -> UserError:
    from agent_env.plugins.reporting import missing
    from agent_env.runtime import current

    error = missing(current().host, "agent", agent_id)
    if str(error).startswith("no "):  # not a known plugin's: maybe the user meant their own
        return type(error)(f"{error}; none is stored under that id either (agent-env "
                           f"a2a-agent put --id {agent_id} --folder DIR stores one)")
    return error
