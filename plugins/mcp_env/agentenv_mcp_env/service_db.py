"""The ``service_db`` env type: a stored env state store that runs in place of the built-in one
when a run names it (``task run --service-db-env-id ID``, ``env deploy --service-db ID``).

``agent-env env service-db put [--id ID]`` stores the PostgreSQL store this installation
builds (from Debian's packages; :data:`agentenv_mcp_env.state.CONTEXT`), so a run can pin one
version of it; ``--context DIR`` stores a build context of your own, whose image must behave as
the built-in one does: PostgreSQL on port 5432 with user, password and database ``agentenv``,
one schema per name in ``AGENTENV_SCHEMAS`` (comma separated), its data under
``/var/lib/postgresql`` (where a durable env state's volume is mounted), and
``/tmp/agentenv-ready`` once it accepts connections. A store env is never deployed on its own.
"""

from __future__ import annotations

from typing import Any, ClassVar

from agent_env.api import EnvType, StepError
from agentenv_mcp_env.state import LOCAL_POSTGRES

#: The id ``env service-db put`` stores under when given none (the reference's default).
DEFAULT_ID = "default-db"


class ServiceDbEnv(EnvType):
    """An env state store image, built from its stored build context (see the module)."""

    name: ClassVar[str] = "service_db"
    serves_env_state: ClassVar[tuple[str, ...]] = (LOCAL_POSTGRES,)

    @classmethod
    def command(cls) -> Any:
        """``agent-env env service-db put``."""
        from agentenv_mcp_env.cli import service_db

        return service_db

    async def deploy(self, ctx: Any, sandbox: Any, **options: Any) -> Any:
        raise StepError(f"'{self.source.id}' is an env state store: it is not deployed on its "
                        "own; name it with --service-db-env-id (task run) or --service-db (env "
                        "deploy) for the env state of the envs a run deploys")
