"""``agent-env up``: serve the explorer on this machine and print the URL to open.

Only click is imported at module top (the CLI lists every command at start); aiohttp and the
app load when the command runs.
"""

from __future__ import annotations

import click

#: ``agent-env up``'s port when neither ``--port`` nor ``[explorer] port`` names one.
DEFAULT_PORT = 8234


@click.command("up")
@click.option("--port", type=click.IntRange(0, 65535),
              help=f"TCP port (0 picks a free one; default: [explorer] port, else "
                   f"{DEFAULT_PORT}).")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to bind. Anything but loopback exposes your runs to the network.")
@click.option("--allow-host", "allow_hosts", multiple=True,
              help="An extra Host header name to answer (a reverse proxy's); repeatable; "
                   "[explorer] allowed_hosts adds to them.")
def up(port: int | None, host: str, allow_hosts: tuple[str, ...]) -> None:
    """Serve the explorer: a page and API to watch, inspect and compare runs."""
    from agent_env.api import UserError, current
    from agentenv_explorer.serve import serve

    section = current().config.section("explorer")
    configured = section.get("allowed_hosts", [])
    if not isinstance(configured, list) or not all(isinstance(h, str) for h in configured):
        raise UserError("[explorer] allowed_hosts must be a list of host names")
    if port is None:
        port = section.get("port", DEFAULT_PORT)
        if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
            raise UserError(f"[explorer] port must be a TCP port (0 to 65535), not {port!r}")
    serve(host, port, (*allow_hosts, *configured))
