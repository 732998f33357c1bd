"""The ``gateway_server`` env type: a stored gateway that envs deploy behind, in place of the
built-in one, when a run names it (``task run --gateway-env-id ID``, ``env deploy --gateway
ID``).

``agent-env env gateway put --id ID`` stores the gateway this installation builds (so a run
can pin one version of it); ``--context DIR`` stores a build context of your own instead, whose
image must run the gateway as the built-in one does: ``python -m agentenv_protocol.gateway``
with the arguments the deploy gives (``--child`` per env server, ``--name``, ``--port 18765``,
the token in ``AGENTENV_GATEWAY_TOKEN``). A gateway env is never deployed on its own.
"""

from __future__ import annotations

from typing import Any, ClassVar

from agent_env.api import EnvType, StepError


class GatewayServerEnv(EnvType):
    """A gateway image, built from its stored build context (see the module)."""

    name: ClassVar[str] = "gateway_server"
    is_gateway: ClassVar[bool] = True

    @classmethod
    def command(cls) -> Any:
        """``agent-env env gateway put``."""
        from agentenv_mcp_env.cli import gateway

        return gateway

    async def deploy(self, ctx: Any, sandbox: Any, **options: Any) -> Any:
        raise StepError(f"'{self.source.id}' is a gateway env: it is not deployed on its own; "
                        "name it with --gateway-env-id (task run) or --gateway (env deploy) to "
                        "deploy envs behind it")
