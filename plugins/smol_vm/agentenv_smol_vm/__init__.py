"""Local microVMs for AgentEnv: the ``smol_vm`` sandbox provider (``smolmachines`` SDK).

Modules: :mod:`.provider` (the provider, its probe boot and its sandboxes), :mod:`.docker_host`
(containers run by the Docker daemon inside a VM), :mod:`.plugin` (the hook). Nothing imports
the SDK at import time: the CLI loads this plugin on every start.
"""

__version__ = "0.1.0"
