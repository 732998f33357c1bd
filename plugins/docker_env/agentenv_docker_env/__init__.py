"""Local Docker for AgentEnv: hermetic image builds, container sandboxes and image stores.

Nothing here imports the ``docker`` SDK at import time: the CLI loads this plugin on every start,
so the SDK is imported inside the functions that talk to the engine.

Modules: :mod:`.engine` (the client), :mod:`.build` (``build_image`` on the engine; the
engine-independent planning, context digest and hermetic protocol wheel are the core's
:mod:`agent_env.images`),
:mod:`.sandbox` (the ``docker`` sandbox provider), :mod:`.stores` (``local`` and
``local_registry`` image stores), :mod:`.plugin` (the hook implementations).
"""

__version__ = "0.1.0"

LABEL_PREFIX = "agentenv"
RUN_LABEL = "agentenv.run"
SANDBOX_LABEL = "agentenv.sandbox"
