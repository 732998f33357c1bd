"""db-mcp: the env state's PostgreSQL for whoever holds the env's token (a developer looking at
what the servers wrote, a verifier): its schemas, their tables, a table's columns, and
read-only queries. The gateway serves it at ``/env/db-mcp/mcp`` beside the env's own tools,
never among them."""

import datetime
import decimal
import os
import uuid

import psycopg
from psycopg.rows import dict_row

from agentenv_protocol import AgentEnvEnvironment, AgentEnvError, environment_card, tool

URL = os.environ["DATABASE_URL"]
#: A query answers at most this many rows (then says it stopped).
MAX_ROWS = 1000


def _plain(value):
    """A column value as JSON can carry it."""
    if isinstance(value, (decimal.Decimal, datetime.date, datetime.time, uuid.UUID)):
        return str(value)
    if isinstance(value, (bytes, memoryview)):
        return bytes(value).hex()
    return value


def _rows(sql: str, params: tuple = (), limit: int = MAX_ROWS) -> tuple[list[dict], bool]:
    try:
        with psycopg.connect(URL, row_factory=dict_row, connect_timeout=10) as db:
            db.read_only = True
            cursor = db.execute(sql, params)
            if cursor.description is None:
                return [], False
            rows = cursor.fetchmany(limit + 1)
    except psycopg.Error as exc:
        raise AgentEnvError("query_failed", str(exc).strip()) from None
    return [{k: _plain(v) for k, v in row.items()} for row in rows[:limit]], len(rows) > limit


@environment_card(name="db-mcp", description="The env state's database, read-only.")
class DbMcp(AgentEnvEnvironment):
    @tool(name="list_schemas")
    def list_schemas(self) -> dict:
        """The schemas of the env state (one per env server)."""
        rows, _ = _rows("SELECT schema_name FROM information_schema.schemata WHERE schema_name "
                        "NOT IN ('pg_catalog', 'information_schema', 'pg_toast') "
                        "ORDER BY schema_name")
        return {"schemas": [r["schema_name"] for r in rows]}

    @tool(name="list_tables")
    def list_tables(self, schema: str) -> dict:
        """The tables of one schema."""
        rows, _ = _rows("SELECT table_name FROM information_schema.tables WHERE table_schema = %s "
                        "ORDER BY table_name", (schema,))
        return {"schema": schema, "tables": [r["table_name"] for r in rows]}

    @tool(name="describe")
    def describe(self, schema: str, table: str) -> dict:
        """A table's columns and their types."""
        rows, _ = _rows("SELECT column_name, data_type, is_nullable FROM "
                        "information_schema.columns WHERE table_schema = %s AND table_name = %s "
                        "ORDER BY ordinal_position", (schema, table))
        if not rows:
            raise AgentEnvError("not_found", f"no table {schema}.{table}")
        return {"schema": schema, "table": table, "columns": rows}

    @tool(name="query")
    def query(self, sql: str) -> dict:
        """Run one read-only SQL query (name tables with their schema); at most 1000 rows."""
        rows, more = _rows(sql)
        return {"rows": rows, "truncated": more}


if __name__ == "__main__":
    DbMcp().serve()
