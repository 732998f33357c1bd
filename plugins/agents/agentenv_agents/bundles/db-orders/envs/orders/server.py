"""The orders app: what a support agent works with. It keeps its orders in the shop's database,
the orders-db service of the same env, reached by name on the env's private network."""

import os

import psycopg
from psycopg.rows import dict_row

from agentenv_protocol import AgentEnvEnvironment, AgentEnvError, environment_card, tool

DATABASE_URL = os.environ.get("DATABASE_URL",
                              "postgresql://agentenv:agentenv@env-orders-db:5432/agentenv")
STATUSES = ("pending", "shipped", "delivered", "cancelled")


def _db() -> psycopg.Connection:
    return psycopg.connect(DATABASE_URL, row_factory=dict_row, connect_timeout=10)


@environment_card(name="orders")
class OrdersApp(AgentEnvEnvironment):
    @tool(name="list_orders")
    def list_orders(self, status: str | None = None) -> dict:
        """Every order, or those with one status."""
        with _db() as db:
            if status:
                rows = db.execute("SELECT * FROM orders WHERE status = %s ORDER BY id",
                                  (status,)).fetchall()
            else:
                rows = db.execute("SELECT * FROM orders ORDER BY id").fetchall()
        return {"orders": rows}

    @tool(name="set_order_status")
    def set_order_status(self, order_id: int, status: str) -> dict:
        """Change an order's status (pending, shipped, delivered or cancelled)."""
        if status not in STATUSES:
            raise AgentEnvError("invalid_status", f"status must be one of {', '.join(STATUSES)}")
        with _db() as db:
            row = db.execute("UPDATE orders SET status = %s WHERE id = %s RETURNING *",
                             (status, order_id)).fetchone()
        if row is None:
            raise AgentEnvError("not_found", f"no order {order_id}")
        return {"order": row}


if __name__ == "__main__":
    OrdersApp().serve()
