"""The entities a bundle run will store, while its steps say what they need.

Preflight checks a step's fields against the bundle (``PreflightView``); but what a step
``needs`` (an agent folder to deploy) is looked up where it will be when the run starts: in the
store. A bundle's own entities are stored only once preflight passes, so between the two,
:func:`planning` names them and :func:`planned_folder` finds one by id: a plugin's lookup reads
the bundle's folder as it will be stored.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agent_env.bundles.model import Bundle

_PLANNED: contextvars.ContextVar[Mapping[str, Mapping[str, Path]] | None] = \
    contextvars.ContextVar("agent_env_planned_entities", default=None)


@contextlib.contextmanager
def planning(bundle: Bundle) -> Iterator[None]:
    """While the block runs, ``bundle``'s folder entities are found by :func:`planned_folder`."""
    token = _PLANNED.set({"agents": {a.id: a.folder for a in bundle.agents},
                          "envs": {e.id: e.folder for e in bundle.envs}})
    try:
        yield
    finally:
        _PLANNED.reset(token)


def planned_folder(kind: str, entity_id: str) -> Path | None:
    """The folder of the ``kind`` entity ``entity_id`` the running bundle will store, if any."""
    return (_PLANNED.get() or {}).get(kind, {}).get(entity_id)
