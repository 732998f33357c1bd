"""Click types for the values every command shares (``--id``, ``--version``), so a bad one is
a usage error naming the option (exit 2) on every command, never a traceback from a store
(``--output-dir`` too: checked before the run, not after it).

Why here: an empty id reached the ledger's ``ValueError`` and a 20-digit version SQLite's
``OverflowError``; checking each command separately is how one gets missed.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from agent_env.stores.base import MAX_VERSION

if TYPE_CHECKING:  # generic in newer click only; plain at run time, whatever the version
    _Type = click.ParamType[Any]
else:
    _Type = click.ParamType


class EntityId(_Type):
    """A stored thing's id: some visible text, no control characters."""

    name = "id"

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> str:
        text = str(value)
        if not text.strip():
            self.fail("an id cannot be empty", param, ctx)
        bad = next((c for c in text if unicodedata.category(c) in ("Cc", "Cf")), None)
        if bad is not None:
            self.fail(f"an id cannot hold control characters (U+{ord(bad):04X})", param, ctx)
        return text


class WholeNumber(_Type):
    """A whole number from 1 to ``highest``, written in digits; anything else (``1e30``,
    ``-1``, 25 digits) is a usage error naming the option, before any store sees it."""

    def __init__(self, name: str, highest: int, what: str) -> None:
        self.name, self.highest, self.what = name, highest, what

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> int:
        text = str(value).strip()
        if isinstance(value, int):
            number = value
        elif text.isascii() and text.isdigit() and len(text) <= len(str(self.highest)):
            number = int(text)
        else:
            number = 0
        if not 1 <= number <= self.highest:
            self.fail(f"{value!r} is not {self.what}", param, ctx)
        return number


#: The longest a deployment may be asked to live (a year): an expiry must stay a date.
MAX_TTL_SECONDS = 365 * 24 * 3600

ENTITY_ID = EntityId()
VERSION = WholeNumber("version", MAX_VERSION,
                      f"a version (a whole number from 1 to {MAX_VERSION})")
#: ``1e30`` or ``10**23`` seconds would overflow the expiry date after the sandbox was made
TTL_SECONDS = WholeNumber("seconds", MAX_TTL_SECONDS,
                          f"a time to live (a whole number of seconds from 1 to "
                          f"{MAX_TTL_SECONDS}, a year)")


class OutputDir(_Type):
    """A folder results will be written to, checked before any work starts: it is a folder (or
    can be made in one) that this process can write, so a run never ends in a crash after its
    work is done."""

    name = "directory"

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> Path:
        import os

        from agent_env.config import system_folder

        path = Path(value).expanduser()
        system = system_folder(path)
        if system is not None:  # /proc/self or /dev/null look writable and hold nothing
            self.fail(f"{str(path)!r} is in {system}, the system's; give a folder of your own",
                      param, ctx)
        probe = path
        while not probe.exists() and probe != probe.parent:
            probe = probe.parent
        if probe == path and not path.is_dir():
            self.fail(f"{str(path)!r} is a file, not a folder", param, ctx)
        if not probe.is_dir():
            self.fail(f"{str(path)!r} cannot be made: {str(probe)!r} is not a folder", param,
                      ctx)
        if not os.access(probe, os.W_OK | os.X_OK):
            self.fail(f"{str(path)!r} is not writable here ({str(probe)!r} refuses writes); "
                      "give another folder", param, ctx)
        return path


OUTPUT_DIR = OutputDir()


def run_choices(*, agent: bool = True, per_role: bool = False,
                ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """The run's choices as options, given to the command as one ``choices``
    (:class:`~agent_env.tasks.steps.RunChoices`): ``--model`` (also ``--agent-model``),
    ``--agent`` (also ``--a2a-agent-id``; left out with ``agent=False``), ``--user-model``,
    ``--judge-model``, and with ``per_role`` (``task run``, ``task run-batch``, as the
    reference has them) ``--agent-sandbox``, ``--env-sandbox``,
    ``--apply-trajectory-filter/--no-trajectory-filter``, ``--gateway-env-id``,
    ``--litellm-api-key`` and ``--judge-litellm-api-key``. One definition, so every command
    that runs tasks spells them alike."""
    import functools

    def decorate(command: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(command)
        def with_choices(*args: Any, model: str | None = None, agent_id: str | None = None,
                         user_model: str | None = None, judge_model: str | None = None,
                         agent_sandbox: str | None = None, env_sandbox: str | None = None,
                         trajectory_filter: bool | None = None,
                         model_api_key: str | None = None, judge_api_key: str | None = None,
                         gateway_env: str | None = None, service_db_env: str | None = None,
                         auto_review: str | None = None, **kwargs: Any) -> Any:
            from agent_env.tasks.steps import RunChoices

            choices = RunChoices(model, agent_id, user_model, judge_model, agent_sandbox,
                                 env_sandbox, trajectory_filter, gateway_env, model_api_key,
                                 judge_api_key, service_db_env, auto_review)
            return command(*args, choices=choices, **kwargs)

        options = [
            click.option("--auto-review", type=click.Choice(["approve", "reject"]),
                         help="Decide every review step so (for runs nobody watches)."),
            click.option("--judge-model", metavar="NAME",
                         help="The model that judges rubrics_verifier steps (replaces theirs)."),
            click.option("--user-model", metavar="NAME",
                         help="The model that plays the user of prompt_agent conversations."),
        ]
        if per_role:
            options += [
                click.option("--service-db-env-id", "service_db_env", type=ENTITY_ID,
                             metavar="ID",
                             help="A stored env state store (agent-env env service-db put) "
                                  "every env state of the run runs, instead of the env "
                                  "type's own."),
                click.option("--gateway-env-id", "gateway_env", type=ENTITY_ID, metavar="ID",
                             help="A stored gateway env (agent-env env gateway put) every env "
                                  "deploys behind, instead of the built-in gateway."),
                click.option("--judge-litellm-api-key", "judge_api_key", metavar="KEY",
                             help="The upstream key judges' model calls go with (default: "
                                  "--litellm-api-key); env:NAME or secret:KEY read it."),
                click.option("--litellm-api-key", "model_api_key", metavar="KEY",
                             help="The upstream key this run's model calls go with "
                                  "(replaces [model] api_key); env:NAME or secret:KEY read "
                                  "it."),
                click.option("--apply-trajectory-filter/--no-trajectory-filter",
                             "trajectory_filter", default=None,
                             help="Every rubrics_verifier's trajectory filter on (its own, or "
                                  "the default) or off (the whole trajectory)."),
                click.option("--env-sandbox", metavar="A[,B...]",
                             help="Sandbox providers deploy_env steps use (a fallback chain)."),
                click.option("--agent-sandbox", metavar="A[,B...]",
                             help="Sandbox providers deploy_agent steps use (a fallback "
                                  "chain)."),
            ]
        if agent:
            options.append(click.option(
                "--agent", "--a2a-agent-id", "agent_id", type=ENTITY_ID, metavar="ID",
                help="The agent every deploy_agent step deploys (see agent-env a2a-agent "
                     "list)."))
        options.append(click.option(
            "--model", "--agent-model", "model", metavar="NAME",
            help="The model every prompt_agent step asks for (replaces the steps' own)."))
        for option in options:
            with_choices = option(with_choices)
        return with_choices

    return decorate
