"""Build the explorer from the current runtime's stores and run it until Ctrl-C."""

from __future__ import annotations

import asyncio
import secrets
import sys

from agentenv_explorer.app import LOOPBACK, AgentRow, Explorer, create_app
from agentenv_explorer.live import write_note


def installed_agents() -> list[AgentRow]:
    """The agents installed plugins ship (what ``agent-env a2a-agent list`` shows)."""
    from agent_env.api import current

    host = current().host
    rows = []
    for contribution in host.contributions("agent"):
        if contribution.status != "active":
            continue
        source = contribution.obj
        rows.append(AgentRow(source.name, tuple(source.aliases), contribution.plugin))
    return rows


def build_explorer(token: str, allow_hosts: tuple[str, ...] = ()) -> Explorer:
    from agent_env.api import UserError, current

    runtime = current()
    try:
        documents = runtime.store("document")
        objects = current().object_store
    except Exception as exc:
        raise UserError(f"the explorer cannot open the configured stores ({exc}); "
                        "check [stores] with `agent-env config show`") from None
    return Explorer(documents=documents, versioned=current().versioned_store, objects=objects,
                    token=token, agents=installed_agents,
                    allowed_hosts=frozenset(h.lower() for h in allow_hosts))


def serve(host: str, port: int, allow_hosts: tuple[str, ...]) -> None:
    from aiohttp import web

    from agent_env.api import UserError

    token = secrets.token_urlsafe(24)
    explorer = build_explorer(token, allow_hosts)
    if host not in LOOPBACK:
        explorer.allowed_hosts = explorer.allowed_hosts | {host.lower()}
        print(f"Warning: serving on {host}, reachable from other machines; keep the token "
              "secret, and name the host clients use with --allow-host.", file=sys.stderr)
    app = create_app(explorer)

    async def main() -> None:
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, host, port)
        try:
            await site.start()
        except OSError as exc:
            await runner.cleanup()
            import errno
            import socket

            if isinstance(exc, socket.gaierror) or exc.errno == errno.EADDRNOTAVAIL:
                raise UserError(f"cannot listen on {host} ({exc.strerror or exc}): it is not "
                                "an address of this machine; give one with --host (such as "
                                "127.0.0.1)") from None
            if exc.errno == errno.EADDRINUSE:
                raise UserError(f"cannot listen on {host}:{port} ({exc.strerror}); pick "
                                "another port with --port") from None
            raise UserError(f"cannot listen on {host}:{port} ({exc.strerror or exc})") from None
        bound = runner.addresses[0][1]
        shown = f"[{host}]" if ":" in host else host
        # runs on this machine post their events here (agentenv_explorer.live)
        local = "127.0.0.1" if host in ("0.0.0.0", "localhost") else shown
        note = write_note(f"http://{local}:{bound}", token)
        print(f"Explorer: http://{shown}:{bound}/?token={token}", flush=True)
        print("Press Ctrl-C to stop.", flush=True)
        try:
            await asyncio.Event().wait()
        finally:
            note.unlink(missing_ok=True)
            await runner.cleanup()

    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        pass
