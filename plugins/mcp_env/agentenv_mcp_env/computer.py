"""The ``computer_driver`` env type: a desktop, served by a driver, behind the gateway.

An ``envs/<name>/env.toml`` as the reference writes one::

    type = "computer_driver"
    module = "driver.py:MyDriver"     # a file of the folder, and its ComputerDriverEnvironment

At preflight the class is read in a process of its own with its imports it lacks stubbed
(``python -m agentenv_protocol.computer._declare``, so the driver's own dependencies need not
be installed here): a file or class that does not exist, a class that is no driver, or one that
names no platform is refused, as the reference refuses it at put.

A deploy builds the desktop image (:data:`DESKTOP_CONTEXT`: Xvfb at 1280x800, openbox, an xterm,
xdotool and python-xlib from Debian's and PyPI's packages) and, on it, the driver's folder at
``/opt/driver``; the container starts the X session, then serves the driver
(:mod:`agentenv_protocol.computer.run`) as the env's MCP server behind the gateway, which is
published as for any env. The ``computer_*`` tools answer with frames and PNG screenshots; an X
server that does not start ends the container with the reason, and the deploy fails with it.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from typing import TYPE_CHECKING, Any, ClassVar

from agent_env.api import EnvSource, StepError, build_with_progress, write_env_files
from agentenv_mcp_env.deployment import (
    ENV_LABEL,
    McpServerEnv,
    policy_problems,
    unknown_key_problems,
)
from agentenv_mcp_env.sources import DESKTOP_CONTEXT, scratch_folder

if TYPE_CHECKING:
    from agent_env.api import Sandbox

KEYS = ("module", "network_policy")
DESKTOP_IMAGE = "agentenv-desktop"
#: How long reading a driver's class at preflight may take.
DECLARE_TIMEOUT_S = 60
DRIVER_DOCKERFILE = """\
FROM {base}
COPY --chown=desktop . /opt/driver
RUN if [ -f /opt/driver/requirements.txt ]; then \\
      pip install --no-cache-dir --disable-pip-version-check --user \\
      -r /opt/driver/requirements.txt; fi
CMD ["/opt/driver", "{module}"]
"""


def module_problem(module: object, files: set[str]) -> str | None:
    """What is wrong with ``module`` (``"<file>:<class>"`` naming a file of ``files``)."""
    if not isinstance(module, str):
        return ('module is required: the driver\'s file and class, such as '
                '"driver.py:MyDriver"')
    file, _, name = module.partition(":")
    if not name or file not in files:
        return (f"module {module!r} names no \"<file>:<class>\" of this folder; it has "
                f"{', '.join(sorted(files)) or 'no files'}")
    return None


def declare(folder: str, module: str) -> dict[str, Any]:
    """What the driver class declares (see :mod:`agentenv_protocol.computer._declare`);
    ValueError saying why it cannot be read."""
    file, _, name = module.partition(":")
    try:
        done = subprocess.run([sys.executable, "-m", "agentenv_protocol.computer._declare",
                               folder, file, name], capture_output=True, text=True,
                              timeout=DECLARE_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        raise ValueError(f"reading {module} took over {DECLARE_TIMEOUT_S} s") from None
    if done.returncode != 0:
        said = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise ValueError(f"{module} cannot be read: {said}")
    return dict(json.loads(done.stdout))


class ComputerDriverEnv(McpServerEnv):
    """A desktop served by the folder's driver (see the module)."""

    name: ClassVar[str] = "computer_driver"
    env_state_types: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def bundle_problems(cls, env: Any, bundle: Any) -> list[str]:
        where = f"{env.label}/env.toml"
        problems = unknown_key_problems(env, KEYS, "computer_driver")
        module = env.settings.get("module")
        problem = module_problem(module, {f.path for f in env.files})
        if problem:
            return [*problems, f"{where}: {problem}"]
        try:
            declare(str(env.folder), str(module))
        except ValueError as exc:
            problems.append(f"{where}: {exc}")
        return problems + policy_problems(where, env.settings)

    @classmethod
    def command(cls) -> Any:
        return None

    async def _build_env(self, sandbox: Sandbox, source: EnvSource, say: Any) -> str:
        """The desktop image, then the driver's folder on it."""
        module = source.settings.get("module")
        problem = module_problem(module, set(source.files))
        if problem:
            raise StepError(f"env {source.id}: {problem}")
        base = await build_with_progress(sandbox, str(DESKTOP_CONTEXT), DESKTOP_IMAGE,
                                         {"agentenv.role": "desktop"}, "desktop", say)
        with scratch_folder("agent-env-driver-") as folder:
            await asyncio.to_thread(write_env_files, self.artifacts, source, folder)
            (folder / "Dockerfile").write_text(
                DRIVER_DOCKERFILE.format(base=base, module=module), encoding="utf-8")
            return await build_with_progress(sandbox, str(folder), source.name,
                                             {ENV_LABEL: source.id}, f"envs/{source.name}",
                                             say)
