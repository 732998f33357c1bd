"""boxd machines for AgentEnv: the ``boxd`` sandbox provider.

Modules: :mod:`.provider` (the provider and its sandboxes, on the ``boxd`` SDK), :mod:`.plugin`
(the hook). Nothing imports the SDK at import time: the CLI loads this plugin on every start.
"""

__version__ = "0.1.0"
