"""Modal Sandboxes for AgentEnv: the ``modal`` and ``modal_vm`` sandbox providers.

Modules: :mod:`.provider` (the providers and their sandboxes, on the ``modal`` SDK),
:mod:`.plugin` (the hook). Nothing imports the SDK at import time: the CLI loads this plugin on
every start.
"""

__version__ = "0.1.0"
