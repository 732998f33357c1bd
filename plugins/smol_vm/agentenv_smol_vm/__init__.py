"""Local microVMs for AgentEnv: the ``smol_vm`` sandbox provider (``smolmachines`` SDK).

Modules: :mod:`.provider` (the provider, its probe boot and its sandboxes), :mod:`.plugin` (the
hook); containers run by the Docker daemon inside a VM through the core's
:mod:`agent_env.sandbox.docker_host`. Nothing imports
the SDK at import time: the CLI loads this plugin on every start.
"""

__version__ = "0.1.0"
