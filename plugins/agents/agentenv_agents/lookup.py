"""Finding an agent by id: an installed one (a plugin's ``agent_env_agents``), else the running
bundle's own (``agents/<name>``, before the run stores it), else one stored (by ``a2a-agent
put``, or by a bundle's run). Its own module because it reads both the folder format
(:mod:`.definitions`) and the store (:mod:`.stored`), which the store's
module itself builds on."""

from __future__ import annotations

from pathlib import Path

from agent_env.api import (
    AgentDefinition,
    UserError,
    current,
    missing_contribution,
    planned_folder,
)

from .definitions import read_agent
from .stored import installed_agent, load_stored_agent, stored_record


def find_agent(agent_id: str, version: int | None = None) -> AgentDefinition:
    """The installed agent ``agent_id`` (name or alias), else the one ``a2a-agent put`` stored
    (``version``, default the latest), read; MissingPluginError when neither has it.

    Installed agents have no versions: ``version`` applies to stored ones (``put`` refuses an
    installed agent's id, so an id is never both)."""
    source = installed_agent(agent_id)
    if source is not None:
        return read_agent(source.name, Path(source.path))
    planned = planned_folder("agents", agent_id)  # a bundle's own, before the run stores it
    if planned is not None:
        return read_agent(agent_id, planned)
    record = stored_record(agent_id, version)
    if record is not None:
        return load_stored_agent(record)
    raise _missing_agent(agent_id)


def _missing_agent(agent_id: str) -> UserError:
    error = missing_contribution(current().host, "agent", agent_id)
    if str(error).startswith("no "):  # not a known plugin's: maybe the user meant their own
        return type(error)(f"{error}; none is stored under that id either (agent-env "
                           f"a2a-agent put --id {agent_id} --folder DIR stores one)")
    return error
