"""The audit: another server of the env that reads the ledger's rows from the same state store
(the ledger's schema, by name), with nothing shared but the database."""

import os

import psycopg

from agentenv_protocol import AgentEnvEnvironment, environment_card, tool

DATABASE_URL = os.environ["DATABASE_URL"]


@environment_card(name="audit")
class Audit(AgentEnvEnvironment):
    @tool(name="ledger_entries")
    def ledger_entries(self) -> dict:
        """The ledger's entries, oldest first."""
        with psycopg.connect(DATABASE_URL, connect_timeout=10) as db:
            exists = db.execute("SELECT to_regclass('ledger.entries')").fetchone()[0]
            if exists is None:
                return {"entries": []}
            rows = db.execute("SELECT text FROM ledger.entries ORDER BY id").fetchall()
        return {"entries": [text for (text,) in rows]}


if __name__ == "__main__":
    Audit().serve()
