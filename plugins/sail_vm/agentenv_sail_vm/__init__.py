"""Sail Sailboxes for AgentEnv: the ``sail_vm`` sandbox provider.

Modules: :mod:`.provider` (the provider and its sandboxes, on the ``sail`` SDK), :mod:`.plugin`
(the hook). Nothing imports the SDK at import time: the CLI loads this plugin on every start.
"""

__version__ = "0.1.0"
