"""The ``agent-env`` root command: global options, error handling and exit codes.

Exit codes: 0 ok; 1 a user error, a failed task or a failed check; 2 usage; 130 after SIGINT;
143 after SIGTERM. A :class:`~agent_env.errors.UserError` prints as one line ``Error: ...``
(tracebacks only with ``-v``); anything else is a defect and keeps its traceback.

Startup is kept cheap: ``--version`` answers before anything but click is imported, and plugins
are loaded only when a command is looked up.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import click

from agent_env._version import VERSION

EXIT_USER_ERROR = 1
EXIT_SIGINT = 130
EXIT_SIGTERM = 143


class Terminated(SystemExit):
    """SIGTERM, raised where the process is (as Ctrl-C raises ``KeyboardInterrupt``), so every
    ``finally`` runs: a temporary file being written is removed, a sandbox torn down. Without
    it SIGTERM ends the process on the spot. A ``SystemExit`` so asyncio passes it on from a
    task instead of keeping it there."""

    def __init__(self) -> None:
        super().__init__(EXIT_SIGTERM)


def _on_sigterm(signum: int, frame: Any) -> None:
    raise Terminated


class AgentEnvGroup(click.Group):
    """A group whose commands come from plugins (the core's own included), loaded on demand."""

    _extended = False

    def _ensure_commands(self, ctx: click.Context) -> None:
        if self._extended:
            return
        self._extended = True
        from agent_env.runtime import current

        current().host.extend_cli(self)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        from agent_env.cli.lazy import LazyCommand

        self._ensure_commands(ctx)
        command = super().get_command(ctx, cmd_name)
        if isinstance(command, LazyCommand):  # imported now that it is used
            target = command.target
            try:
                command = self.commands[cmd_name] = command.load()
            except Exception as exc:  # a plugin's command that does not import: one line
                raise click.ClickException(
                    f"the command '{cmd_name}' ({target}) could not be loaded: "
                    f"{exc} (agent-env plugin check says more)") from None
        return command

    def list_commands(self, ctx: click.Context) -> list[str]:
        self._ensure_commands(ctx)
        return super().list_commands(ctx)


def _disable_plugins(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> None:
    names = []
    for value in values:
        if not value.startswith("no:"):
            raise click.BadParameter(f"expected no:NAME, got {value!r}", ctx=ctx, param=param)
        names.append(value[3:])
    if names:
        from agent_env.runtime import current

        current().disable(names)


def _use_config(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    if value:
        from agent_env import config

        os.environ["AGENT_ENV_CONFIG"] = value  # child processes (runs) use the same file
        config.named_by = "--config"


@click.group(cls=AgentEnvGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(VERSION, prog_name="agent-env", message="%(prog)s %(version)s")
@click.option("-v", "--verbose", is_flag=True, help="Debug logs and tracebacks for every error.")
@click.option("--log-json", is_flag=True, help="Logs as JSON lines (or AGENT_ENV_LOG_JSON=1).")
@click.option(
    "--config",
    "config_path",
    metavar="PATH",
    expose_value=False,
    is_eager=True,
    callback=_use_config,
    help="Config file to use instead of the nearest .agentenv/config.toml.",
)
@click.option(
    "-p",
    "plugin_switches",
    metavar="no:NAME",
    multiple=True,
    expose_value=False,
    is_eager=True,
    callback=_disable_plugins,
    help="Turn a plugin off for this command (repeatable).",
)
@click.pass_context
def cli(ctx: click.Context, verbose: bool, log_json: bool) -> None:
    """Build, deploy and run agent environments and the tasks that grade agents in them."""
    ctx.obj = {"verbose": verbose}
    if verbose or log_json or os.environ.get("AGENT_ENV_LOG_JSON"):
        from agent_env.logs import configure_logging

        configure_logging(verbose=verbose, json_lines=log_json or None)


def _print_error(message: str, notes: list[str]) -> None:
    from agent_env.cli.console import echo

    echo(f"Error: {message}", err=True)
    for note in notes:
        echo(note, err=True)


def main(argv: list[str] | None = None, prog_name: str = "agent-env") -> None:
    """Entry point: run the CLI and turn errors into messages and exit codes."""
    args = sys.argv[1:] if argv is None else argv
    verbose = any(a in ("-v", "--verbose") for a in args)
    code = 0
    import signal
    import threading

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _on_sigterm)  # commands with an event loop set their own
    try:
        result: Any = cli.main(args=args, prog_name=prog_name, standalone_mode=False)
        code = result if isinstance(result, int) else 0
    except click.exceptions.Abort:
        click.echo("Aborted.", err=True)
        code = EXIT_SIGINT
    except click.ClickException as exc:
        exc.show()
        code = exc.exit_code
    except click.exceptions.Exit as exc:
        code = exc.exit_code
    except KeyboardInterrupt:
        click.echo("Interrupted.", err=True)
        code = EXIT_SIGINT
    except Terminated:
        click.echo("Terminated.", err=True)
        code = EXIT_SIGTERM
    except Exception as exc:
        from agent_env.errors import UserError

        if isinstance(exc, UserError):
            if verbose:
                import traceback

                traceback.print_exc()
            _print_error(exc.message, exc.notes)
            code = EXIT_USER_ERROR
        elif (disk := _disk_problem(exc)) is not None:
            if verbose:
                import traceback

                traceback.print_exc()
            _print_error(disk, [])
            code = EXIT_USER_ERROR
        else:
            raise
    sys.exit(code)


def _state_disk_full() -> bool:
    """Whether the disk under the state root has no space left (SQLite reports a full disk
    as a disk I/O error when it cannot make its journal files)."""
    try:
        from agent_env.runtime import current

        found = os.statvfs(current().config.state_root)
    except Exception:  # a check for a message: never a second error
        return False
    return found.f_bavail == 0


def _disk_problem(exc: BaseException) -> str | None:
    """One line for a full or read-only disk met anywhere (a store's write, a cache's, a
    record's): the machine's state, not a bug, and the user can fix it. None otherwise."""
    import errno
    import sqlite3

    found: BaseException | None = exc
    while found is not None:  # the store may have wrapped the OSError
        if isinstance(found, OSError) and found.errno in (errno.ENOSPC, errno.EDQUOT,
                                                          errno.EROFS):
            where = f" writing {found.filename}" if found.filename else ""
            fix = "make it writable" if found.errno == errno.EROFS else "free space there"
            return (f"{found.strerror}{where}; {fix} (or set AGENT_ENV_STATE_DIR to a folder on "
                    "another disk) and run the command again")
        if isinstance(found, sqlite3.OperationalError) and (
                "disk is full" in str(found) or "readonly database" in str(found)
                or ("disk I/O error" in str(found) and _state_disk_full())):
            return (f"the local document store cannot write ({found}): the disk under the "
                    "state root is full or read-only; free space there (or set "
                    "AGENT_ENV_STATE_DIR to a folder on another disk) and run the command again")
        found = found.__cause__ or found.__context__
    return None
