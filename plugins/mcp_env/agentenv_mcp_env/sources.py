"""Where an env's build context comes from: a scratch folder claimed in the state root, so that
``agent-env gc`` removes it after a ``kill -9`` mid-build (the files themselves come from the
kernel's :func:`agent_env.api.write_env_files`), or a folder shipped with this plugin."""

from __future__ import annotations

from contextlib import AbstractContextManager
from pathlib import Path

#: The website-browser's build context, shipped with this plugin (see :mod:`.website`).
WEBSITE_BROWSER_CONTEXT = Path(__file__).parent / "website_browser"
#: The desktop computer_driver envs run on, shipped with this plugin (see :mod:`.computer`).
DESKTOP_CONTEXT = Path(__file__).parent / "desktop"


def scratch_folder(prefix: str) -> AbstractContextManager[Path]:
    """A build context's temporary folder, owned by this process."""
    from agent_env.api import owned_scratch

    return owned_scratch(prefix)
