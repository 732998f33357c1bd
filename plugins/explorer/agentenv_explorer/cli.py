"""``agent-env up``: serve the explorer on this machine and print the URL to open.

Only click is imported at module top (the CLI lists every command at start); aiohttp and the
app load when the command runs.
"""

from __future__ import annotations

import click


@click.command("up")
@click.option("--port", type=click.IntRange(0, 65535), default=8234, show_default=True,
              help="TCP port (0 picks a free one).")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to bind. Anything but loopback exposes your runs to the network.")
@click.option("--allow-host", "allow_hosts", multiple=True,
              help="An extra Host header name to answer (a reverse proxy's); repeatable.")
def up(port: int, host: str, allow_hosts: tuple[str, ...]) -> None:
    """Serve the explorer: a page and API to watch, inspect and compare runs."""
    from agentenv_explorer.serve import serve

    serve(host, port, allow_hosts)
