"""Daytona cloud sandboxes for AgentEnv: the ``daytona`` sandbox provider.

Modules: :mod:`.provider` (the provider and its sandboxes, on the ``daytona`` SDK),
:mod:`.plugin` (the hook). Nothing imports the SDK at import time: the CLI loads this plugin
on every start.
"""

__version__ = "0.1.0"
