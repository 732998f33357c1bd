"""The shop's database: PostgreSQL (started here) and an MCP server over it, read-only: list
the tables, describe one, run a query. The orders app writes; this one lets anyone look."""

import subprocess

import psycopg
from psycopg.rows import dict_row

from agentenv_protocol import AgentEnvEnvironment, AgentEnvError, environment_card, tool

URL = "postgresql://agentenv:agentenv@127.0.0.1:5432/agentenv"


def _rows(sql: str, params: tuple = ()) -> list[dict]:
    with psycopg.connect(URL, row_factory=dict_row) as db:
        db.read_only = True
        return db.execute(sql, params).fetchall()


@environment_card(name="orders-db")
class OrdersDb(AgentEnvEnvironment):
    @tool(name="list_tables")
    def list_tables(self) -> dict:
        """The tables of the database."""
        rows = _rows("SELECT table_name FROM information_schema.tables "
                     "WHERE table_schema = 'public' ORDER BY table_name")
        return {"tables": [r["table_name"] for r in rows]}

    @tool(name="describe")
    def describe(self, table: str) -> dict:
        """A table's columns and their types."""
        rows = _rows("SELECT column_name, data_type FROM information_schema.columns "
                     "WHERE table_schema = 'public' AND table_name = %s "
                     "ORDER BY ordinal_position", (table,))
        if not rows:
            raise AgentEnvError("not_found", f"no table {table!r}")
        return {"table": table, "columns": rows}

    @tool(name="query")
    def query(self, sql: str) -> dict:
        """Run one read-only SQL query; its rows."""
        try:
            return {"rows": _rows(sql)}
        except psycopg.Error as exc:
            raise AgentEnvError("query_failed", str(exc).strip()) from None


if __name__ == "__main__":
    subprocess.run(["pg_ctlcluster", "15", "main", "start"], check=True)
    OrdersDb().serve()
