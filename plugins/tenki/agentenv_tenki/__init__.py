"""Tenki Cloud microVMs for AgentEnv: the ``tenki`` sandbox provider.

Modules: :mod:`.provider` (the provider and its sandboxes, on the ``tenki`` SDK),
:mod:`.docker_host` (containers run by the Docker daemon inside a sandbox), :mod:`.plugin` (the
hook). Nothing imports the SDK at import time: the CLI loads this plugin on every start.
"""

__version__ = "0.1.0"
