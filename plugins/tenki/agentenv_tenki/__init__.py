"""Tenki Cloud microVMs for AgentEnv: the ``tenki`` sandbox provider.

Modules: :mod:`.provider` (the provider and its sandboxes, on the ``tenki`` SDK),
:mod:`.plugin` (the hook); containers run by the Docker daemon inside a sandbox through the
core's :mod:`agent_env.sandbox.docker_host`. Nothing imports the SDK at import time: the CLI
loads this plugin on every start.
"""

__version__ = "0.1.0"
