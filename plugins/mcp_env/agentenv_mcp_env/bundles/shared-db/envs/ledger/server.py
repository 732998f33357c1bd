"""The ledger: it keeps entries in its own schema of the env's state store (DATABASE_URL, set by
the deploy's env_state_type = "local_postgres"; its search path is this server's schema)."""

import os

import psycopg

from agentenv_protocol import AgentEnvEnvironment, environment_card, tool

DATABASE_URL = os.environ["DATABASE_URL"]


def _db() -> psycopg.Connection:
    return psycopg.connect(DATABASE_URL, connect_timeout=10)


@environment_card(name="ledger")
class Ledger(AgentEnvEnvironment):
    def __init__(self) -> None:
        super().__init__()
        with _db() as db:  # in this server's schema: the search path puts it first
            db.execute("CREATE TABLE IF NOT EXISTS entries "
                       "(id serial PRIMARY KEY, text text NOT NULL)")

    @tool(name="add_entry")
    def add_entry(self, text: str) -> dict:
        """Write an entry; its id."""
        with _db() as db:
            (entry_id,) = db.execute("INSERT INTO entries (text) VALUES (%s) RETURNING id",
                                     (text,)).fetchone()
        return {"id": entry_id}

    @tool(name="where_am_i")
    def where_am_i(self) -> dict:
        """The schema this server writes to."""
        with _db() as db:
            (schema,) = db.execute("SELECT current_schema()").fetchone()
        return {"schema": schema}


if __name__ == "__main__":
    Ledger().serve()
