"""Where an env's build context is laid out: a scratch folder claimed in the state root, so that
``agent-env gc`` removes it after a ``kill -9`` mid-build (the files themselves come from the
kernel's :func:`agent_env.api.write_env_files`)."""

from __future__ import annotations

from contextlib import AbstractContextManager
from pathlib import Path


def scratch_folder(prefix: str) -> AbstractContextManager[Path]:
    """A build context's temporary folder, owned by this process."""
    from agent_env.api import owned_scratch

    return owned_scratch(prefix)
