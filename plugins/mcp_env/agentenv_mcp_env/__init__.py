"""MCP environments for AgentEnv: env servers deployed behind the authenticated gateway.

Nothing here imports aiohttp, the protocol clients or ``mcp`` at import time: the CLI loads this
plugin at every start. Modules: :mod:`.sources` (an env entity's files as a build context),
:mod:`.gateway_image` (the generated gateway build context), :mod:`.deployment` (the
``mcp_server`` env type, readiness and the deployment record), :mod:`.steps` (``deploy_env``,
``env_outcome_verifier``, ``reset_env``, ``verify_env_card``, ``verify_env_core_protocol``),
:mod:`.plugin` (the hook implementations) and ``bundles/`` (echo-mcp, mail-mcp).
"""

__version__ = "0.1.0"
