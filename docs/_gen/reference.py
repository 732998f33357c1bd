"""The guide's reference pages, generated from the code every time the guide is built.

Why generated: a table typed by hand drifts the day a step gains a key or a plugin adds a
command. MkDocs loads this module as a hook (``hooks:`` in ``mkdocs.yml``); ``on_files`` adds
the pages below to the build, made from what is registered in the running Python:

* ``reference/steps.md``  every step type contributed through ``agent_env_step_types``, its keys
  read from the attrs fields of its class (``#:`` comments above a field are its notes);
* ``reference/config.md`` every section and key of ``agent_env.config``, the ``AGENT_ENV_*``
  variables, each store backend's and sandbox provider's settings (their keyword parameters,
  the same ones ``agent_env.settings`` checks a table against) and each plugin's own table
  (the attrs class in its ``settings`` module);
* ``reference/hooks.md``  every hookspec of ``agent_env.hookspecs`` with its signature and
  docstring, and who implements it;
* ``reference/cli.md``    the ``agent-env`` click group walked, plugin commands included.

A key, section or variable the code has and this module cannot describe is an error, so the
strict build fails instead of printing an incomplete table. Run ``python docs/_gen/reference.py
PAGE`` to print one page.
"""

from __future__ import annotations

import html
import importlib
import inspect
import re
import sys
import textwrap
from collections.abc import Callable
from typing import Any

import attrs
import click

# -- helpers ------------------------------------------------------------------------------


def _cell(text: object) -> str:
    """Text that is safe in one Markdown table cell."""
    return str(text).replace("|", "\\|").replace("\n", " ").strip()


def _code(text: object) -> str:
    """A code span in a table cell: Python-Markdown's tables leave ``|`` inside one alone."""
    shown = str(text).replace("\n", " ").strip()
    return f"`{shown}`" if shown else ""


def _doc(obj: Any) -> str:
    return inspect.cleandoc(obj.__doc__) if obj.__doc__ else ""


def _rst_to_md(text: str) -> str:
    """Docstrings use reST literals and roles; show them as Markdown code."""
    text = re.sub(r":(?:class|mod|func|meth|data|attr):`~?([^`]+)`", r"``\1``", text)
    return re.sub(r"``([^`]+)``", r"`\1`", text)


def _type_name(annotation: Any) -> str:
    if isinstance(annotation, str):
        return annotation
    if isinstance(annotation, type):
        return annotation.__name__
    return str(annotation).replace("typing.", "")


def _default(field: attrs.Attribute) -> str:  # type: ignore[type-arg]
    default = field.default
    if default is attrs.NOTHING:
        return "**required**"
    if isinstance(default, attrs.Factory):  # type: ignore[arg-type]
        return _code(repr(default.factory()))
    return _code(repr(default))


def field_notes(cls: type) -> dict[str, str]:
    """``#:`` comments above each field assignment, in ``cls`` and its bases (nearest wins)."""
    notes: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if klass is object or "__attrs_attrs__" not in vars(klass):
            continue
        try:
            lines = inspect.getsource(klass).splitlines()
        except (OSError, TypeError):
            continue
        pending: list[str] = []
        for line in lines:
            stripped = line.strip()
            if stripped.startswith("#:"):
                pending.append(stripped[2:].strip())
                continue
            match = re.match(r"^\s{4}(\w+)\s*:", line)
            if match and pending:
                notes[match[1]] = " ".join(pending)
            if stripped:
                pending = []
    return notes


# -- steps --------------------------------------------------------------------------------


def _host() -> Any:
    from agent_env.plugins import PluginHost
    from agent_env.plugins.discovery import entry_points

    # every installed plugin, whatever AGENT_ENV_PLUGINS says in the shell that builds
    host = PluginHost(only={record.distribution for record, _ in entry_points()})
    host.load()
    return host


def _plugin_label(host: Any, module: str) -> str:
    record = host.record(module)
    if record is None:
        return module
    if record.builtin:
        return f"core (`{module}`)"
    return f"plugin `{record.name}` ({record.distribution})"


def _order(host: Any, plugin: str) -> tuple[int, str]:
    record = host.record(plugin)
    return (0 if record is not None and record.builtin else 1, plugin)


def bundle_examples(host: Any) -> dict[str, tuple[str, str, dict[str, Any]]]:
    """step type -> (bundle, task file, the first such step) over the shipped bundles' tasks,
    in bundle name order: an example that ``agent-env run <bundle>`` runs."""
    import json
    from pathlib import Path

    found: dict[str, tuple[str, str, dict[str, Any]]] = {}
    bundles = sorted((c.obj for c in host.contributions("bundle") if c.status == "active"),
                     key=lambda b: b.name)
    for bundle in bundles:
        for task in sorted((Path(bundle.path) / "tasks").glob("*.json")):
            steps = json.loads(task.read_text())
            for step in steps if isinstance(steps, list) else []:
                if isinstance(step, dict) and isinstance(step.get("type"), str):
                    found.setdefault(step["type"], (bundle.name, f"tasks/{task.name}", step))
    return found


def step_example(host: Any, examples: dict[str, Any], name: str, cls: type) -> list[str]:
    """The example section of one step type (from a shipped bundle, else the class's)."""
    import json

    if name in examples:
        bundle, task, step = examples[name]
        lead = f"From the shipped bundle `{bundle}` ({task}; `agent-env run {bundle}` runs it):"
    elif getattr(cls, "example", None):
        step, lead = cls.example, "Example (checked by the docs tests):"
    else:
        return []
    return ["", lead, "", "```json", json.dumps(step, indent=1), "```"]


def steps_page(host: Any | None = None) -> str:
    from agent_env.tasks.steps import COMMON_KEYS, Step

    host = host or _host()
    registry = host.registry("step_type")
    found = sorted(
        (c for c in host.contributions("step_type") if c.status == "active"),
        key=lambda c: (*_order(host, c.plugin), c.name),
    )
    common = {f.name: f for f in attrs.fields(Step)}
    notes = field_notes(Step)
    out = [
        "# Step types",
        "",
        "<!-- generated by docs/_gen/reference.py from the registered step classes -->",
        "",
        f"Generated when this guide was built, from the {len(found)} step types that the "
        "installed plugins register through `agent_env_step_types`: a step's JSON keys are "
        "the attrs fields of its class, so this page cannot drift from the code. "
        "[Tasks and steps](../tasks.md) explains how steps run.",
        "",
        "## Keys every step has",
        "",
        "| key | type | default | notes |",
        "|---|---|---|---|",
        "| `type` | str | **required** | selects the step class (the headings below) |",
    ]
    for name in COMMON_KEYS:
        if name == "type":
            continue
        field = common[name]
        out.append(f"| `{name}` | {_code(_type_name(field.type))} | {_default(field)} | "
                   f"{_cell(notes.get(name, COMMON_NOTES.get(name, '')))} |")
    examples = bundle_examples(host)
    out += ["", "Step types, core first, then by plugin:", ""]
    for contribution in found:
        cls = registry[contribution.name]
        out.append(f"- [`{contribution.name}`](#{_anchor(contribution.name)})")
    for contribution in found:
        cls = registry[contribution.name]
        doc = _doc(cls) if "__doc__" in vars(cls) and cls.__doc__ else _doc(
            sys.modules[cls.__module__])
        notes = field_notes(cls)
        out += [
            "",
            f"## `{contribution.name}`",
            "",
            f"From {_plugin_label(host, contribution.plugin)}, class "
            f"`{cls.__module__}.{cls.__qualname__}`.",
            "",
            _rst_to_md(doc),
            "",
        ]
        entity = getattr(cls, "entity_fields", {})
        own = [f for f in attrs.fields(cls) if f.name not in COMMON_KEYS or
               f.default != common[f.name].default]
        if not own:
            out.append("No keys beyond the common ones.")
        else:
            out += ["| key | type | default | notes |", "|---|---|---|---|"]
        for field in own:
            note = notes.get(field.name) or KEY_NOTES.get(field.name, "")
            if field.name in entity:
                kind = entity[field.name].rstrip("s")
                note = (f"names a bundle {kind} (rewritten to its id, checked at preflight)"
                        + (f"; {note}" if note else ""))
            out.append(f"| `{field.name}` | {_code(_type_name(field.type))} | "
                       f"{_default(field)} | {_cell(_rst_to_md(note))} |")
        out += step_example(host, examples, contribution.name, cls)
    return "\n".join(out) + "\n"


#: What a key means wherever it appears, for fields whose class gives no ``#:`` note. Keys of
#: the same name mean the same thing in every step type; a key missing here just has no note.
KEY_NOTES = {
    "sandbox_name": "a sandbox's name: `deploy_sandbox` gives it, other steps name it to work "
                    "there",
    "sandbox_type": "a sandbox provider or a fallback chain `a,b` (default: `[sandbox] "
                    "default`; `--sandbox` overrides)",
    "sandbox_mode": "`vm` (a host that can run containers) or `container`",
    "env_id": "an env of the bundle (or a stored env id) deployed by `deploy_env`",
    "env_ids": "envs whose tools the agent gets",
    "env_version": "the env's version (default: the latest)",
    "agent_name": "the agent, by the name its `deploy_agent` gave it",
    "prompt_id": "the prompt whose reply is checked (a `prompt_agent` step's id by default)",
    "verifier_id": "the id the verification is recorded under (default: this step's id)",
    "score_aggregator": "`all_pass`, `any_pass` or `weighted_average`",
    "criteria": "the checks, each an object with a `type` (see Verifiers and scores)",
    "ttl_seconds": "the sandbox's lifetime in seconds, where the provider supports one",
    "cpu": "CPUs for the sandbox",
    "memory_mb": "memory for the sandbox, in MiB",
    "timeout_seconds": "seconds before the step gives up",
    "artifact_id": "an artifact of the bundle (or a stored artifact id)",
    "file_artifact_id": "a one-file artifact holding the script",
    "script_artifact_id": "an artifact holding the script",
    "destination_path": "a folder in the sandbox (one-file artifacts: or the file's own path)",
    "system_prompt": "the agent's system prompt",
    "role": "the role the agent's tool calls carry to the envs",
    "image": "the image to run",
    "env_vars": "environment variables set in the sandbox",
}

COMMON_NOTES = {
    "id": "unique in the task; other steps name it in `depends_on`, scores are reported by it",
    "depends_on": "step ids this step waits for (only earlier steps); none anywhere: a chain",
    "fail_task_on_error": "false: a failure is recorded and dependents still run",
    "retry_config": "`{retry_from_step_id, max_retries}`: roll back and run again on failure",
    "description": "free text, shown nowhere but the task file",
}


def _anchor(name: str) -> str:
    """The id MkDocs gives a heading ``## `name` ``."""
    return re.sub(r"[^\w\- ]", "", name).strip().lower().replace(" ", "-")


# -- config -------------------------------------------------------------------------------

#: What each key of ``agent_env.config.KNOWN_KEYS`` means. A key the code knows and this
#: table does not fails the build (see ``config_page``), so a new key gets its sentence.
CONFIG_KEYS: dict[str, dict[str, str]] = {
    "stores": {
        "document": "document store backend (versioned entities, run records); "
                    "a name, or a table with `backend` and its settings",
        "object": "object store backend (artifact files, trajectories)",
        "image": "image store backend (where env and agent images live)",
        "secret": "secret store backend (what `secret:KEY` references read)",
    },
    "runner": {
        "impl": "the runner task runs go through (`local`, the default: in this process; "
                "`ray` with the ray_runner plugin); also `AGENT_ENV_RUNNER`. The old `backend` "
                "key is refused, naming `impl`",
        "max_concurrency": "how many task runs `agent-env run` and `task run` run at once "
                           "(default 4; `eval run` takes `--max-concurrency`)",
        "config": "the runner's own settings table (`[runner.config]`), checked against its "
                  "`from_config` parameters",
    },
    "sandbox": {
        "default": "sandbox provider for steps that name none; `a,b` is a fallback chain",
        "agent_default": "sandbox provider for agents (falls back to `default`)",
        "providers": "`[sandbox.providers.NAME.config]`: a provider's settings (below)",
    },
    "model": {
        "base_url": "the real model endpoint the run's model gateway forwards agents' calls "
                    "to",
        "api_key": "its key (write `env:NAME` or `secret:KEY`, never the key itself)",
        "name": "the model agents use when a prompt names none (same as `default`)",
        "default": "the reference's name for `name`",
        "roles": "a model per role: `agent`, `user` (a simulated conversation user; never "
                 "the default model) and `judge` (rubrics), over the default",
        "params": "request fields added to AgentEnv's own model calls (the judge's, the "
                  "simulated user's); `model`, `messages` and the call's own keys are refused",
        "headers": "headers sent to the upstream with every call (else the host's "
                   "`LITELLM_EXTRA_HEADERS`, a JSON object)",
    },
    "plugins": {"*": "`[plugins.DISTRIBUTION]`: a plugin's own settings table (below)"},
    "state": {"root": "where local stores and work folders live (`AGENT_ENV_STATE_DIR`, else "
                      "`$XDG_STATE_HOME/agent-env`, else `~/.local/state/agent-env`)"},
    "agents": {"default": "the agent `deploy_agent` deploys when neither its step "
                          "(`a2a_agent_id`) nor `--agent` names one",
               "default_a2a_agent_id": "the reference's name for `default`"},
    "task_steps": {"impls": "step classes of your own by `module:Class` (a `Step`, or a "
                            "`TaskStep` written for the reference), loaded beside the "
                            "plugins'"},
    "envs": {"impls": "env type classes of your own by `module:Class` (`EnvType` "
                      "subclasses), loaded beside the plugins'",
             "network_policy": "what env servers may reach outside their sandbox when neither "
                               "the deploy step nor the env's `env.toml` says: `none` (the "
                               "default) or `open`"},
    "explorer": {"port": "the port `agent-env up` serves on when `--port` names none "
                         "(default 8234)",
                 "allowed_hosts": "Host names `agent-env up` answers besides loopback, with "
                                  "its `--allow-host` ones"},
    "conversations": {"default_human_a2a_url": "the A2A URL of the user (a human-in-the-loop "
                                               "hub, or any agent) of a multi-turn "
                                               "`prompt_agent` with no user agent, "
                                               "`user_model` or `user_a2a_url`"},
}

#: Variables the kernel reads besides ``ENV_VARIABLES`` (which map onto config keys).
OTHER_VARIABLES = {
    "AGENT_ENV_CONFIG": "the config file to read (it must exist) instead of searching for "
                        "`.agentenv/config.toml`",
    "AGENT_ENV_STATE_DIR": "the state root (same as `[state] root`)",
    "AGENT_ENV_PLUGINS": "`a,b`: load only these outside plugins (built-ins always load)",
    "AGENT_ENV_TRACE_PLUGINS": "`1`: print every hook call to stderr",
    "AGENT_ENV_LOG_JSON": "`1`: logs as JSON lines (same as `--log-json`)",
}


def _parameters_table(target: Callable[..., Any], injected: set[str]) -> list[str]:
    try:
        signature = inspect.signature(target)
    except (TypeError, ValueError):
        return ["Its settings could not be read."]
    rows = []
    for name, parameter in signature.parameters.items():
        if name in injected or parameter.kind not in (
                inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD):
            continue
        default = ("**required**" if parameter.default is inspect.Parameter.empty
                   else _code(repr(parameter.default)))
        annotation = ("" if parameter.annotation is inspect.Parameter.empty
                      else _code(_type_name(parameter.annotation)))
        rows.append(f"| `{name}` | {annotation} | {default} |")
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in signature.parameters.values()):
        rows.append("| (any other key) | | checked by the backend itself |")
    if not rows:
        return ["No settings."]
    return ["| key | type | default |", "|---|---|---|", *rows]


def config_page(host: Any | None = None) -> str:
    from agent_env import config
    from agent_env.contributions import Lazy
    from agent_env.sandbox.base import SandboxProvider

    host = host or _host()
    out = [
        "# Configuration reference",
        "",
        "<!-- generated by docs/_gen/reference.py from agent_env.config and the plugins -->",
        "",
        "Generated when this guide was built from `agent_env.config` (its known sections and "
        "keys, its variables) and from the installed plugins (the keyword parameters of each "
        "store factory and provider, which are exactly what the kernel checks a table "
        "against). [Configuration](../configuration.md) explains the file, precedence and "
        "references.",
        "",
        "## Sections and keys",
        "",
        "| section | key | default | meaning |",
        "|---|---|---|---|",
    ]
    for section, keys in config.KNOWN_KEYS.items():
        described = CONFIG_KEYS.get(section)
        if described is None:
            raise KeyError(f"config section [{section}] has no description in {__file__}")
        for key in sorted(keys) if keys is not None else ["*"]:
            if key not in described:
                raise KeyError(f"config key [{section}] {key} has no description in {__file__}")
            default = ""
            if section == "stores":
                default = _code(config.DEFAULT_STORES[key])
            elif (section, key) == ("sandbox", "default"):
                default = "`local`"
            out.append(f"| `[{section}]` | `{key}` | {default} | {_cell(described[key])} |")
    out += [
        "",
        "## Variables",
        "",
        "Each overrides the file; `configure()` in code overrides them.",
        "",
        "| variable | sets |",
        "|---|---|",
    ]
    for variable, (section, key) in config.ENV_VARIABLES.items():
        out.append(f"| `{variable}` | `[{section}] {key}` |")
    for variable, meaning in OTHER_VARIABLES.items():
        out.append(f"| `{variable}` | {meaning} |")
    out += ["", "## Store backends", "",
            "Chosen with `[stores] KIND = \"NAME\"`; settings go in the table form "
            "`[stores.KIND]` with `backend = \"NAME\"`. `state_root` is filled in by the "
            "kernel.", ""]
    store_registry = host.registry("store")
    for contribution in sorted(
        (c for c in host.contributions("store") if c.status == "active"),
        key=lambda c: (*_order(host, c.plugin), c.name),
    ):
        backend = store_registry[contribution.name]
        factory = backend.factory
        if isinstance(factory, Lazy):
            factory = host.load_lazy("store", contribution.name, factory)
        out += [f"### `{contribution.name}`", "",
                f"From {_plugin_label(host, contribution.plugin)}.", "",
                *_parameters_table(factory, {"state_root"}), ""]
    out += ["## Sandbox providers", "",
            "Named by `sandbox_type` in steps and `[sandbox] default`; settings go in "
            "`[sandbox.providers.NAME.config]`.", ""]
    provider_registry = host.registry("sandbox_provider")
    for contribution in sorted(
        (c for c in host.contributions("sandbox_provider") if c.status == "active"),
        key=lambda c: (*_order(host, c.plugin), c.name),
    ):
        cls = provider_registry[contribution.name]
        owner = next((k for k in cls.__mro__ if "from_config" in vars(k)), None)
        factory = cls if owner is SandboxProvider else cls.from_config
        first = _doc(cls).split("\n\n")[0]
        out += [f"### `{contribution.name}`", "",
                f"From {_plugin_label(host, contribution.plugin)}. {_rst_to_md(first)}", "",
                *_parameters_table(factory, set()), ""]
    out += ["## Plugin settings", "",
            "A plugin that implements `agent_env_configure` receives its "
            "`[plugins.DISTRIBUTION]` table and checks it against an attrs class in its "
            "`settings` module.", ""]
    for record in sorted(host.records, key=lambda r: (not r.builtin, r.name)):
        module = host.pm.get_plugin(record.name)
        if module is None or not hasattr(module, "agent_env_configure"):
            continue
        out += [f"### `[plugins.{record.distribution}]`", ""]
        out += _plugin_settings(module)
        out.append("")
    return "\n".join(out) + "\n"


def _plugin_settings(module: Any) -> list[str]:
    package = module.__name__.split(".")[0]
    try:
        settings = importlib.import_module(f"{package}.settings")
    except ImportError:
        return ["Its settings class is not in a `settings` module; see the plugin's README."]
    classes = [c for c in vars(settings).values() if isinstance(c, type)
               and attrs.has(c) and c.__module__ == settings.__name__]
    lines: list[str] = []
    for cls in classes:
        lines += [_rst_to_md(_doc(cls)), "", "| key | type | default |", "|---|---|---|"]
        for field in attrs.fields(cls):
            lines.append(f"| `{field.name}` | {_code(_type_name(field.type))} | "
                         f"{_default(field)} |")
    return lines or ["No settings."]


# -- hooks --------------------------------------------------------------------------------


def hooks_page(host: Any | None = None) -> str:
    from agent_env import hookspecs
    from agent_env.plugins.registries import CONTRIBUTION_HOOKS

    host = host or _host()
    kinds = {hook: kind for kind, (hook, _) in CONTRIBUTION_HOOKS.items()}
    source = inspect.getsource(hookspecs)
    out = [
        "# Hook reference",
        "",
        "<!-- generated by docs/_gen/reference.py from agent_env/hookspecs.py -->",
        "",
        "Generated from `core/agent_env/hookspecs.py` when this guide was built. Implement a "
        "hook with `@hookimpl` from `agent_env.api`; [Plugins](../plugins.md) shows a "
        "whole plugin.",
        "",
        _rst_to_md(_doc(hookspecs)),
    ]
    hooks = [(name, fn) for name, fn in vars(hookspecs).items()
             if name.startswith("agent_env_") and callable(fn)]
    hooks.sort(key=lambda item: source.index(f"def {item[0]}("))
    for name, fn in hooks:
        signature = _plain_signature(fn)
        implementers = sorted(
            {impl.plugin_name for impl in getattr(host.pm.hook, name).get_hookimpls()},
            key=lambda plugin: _order(host, plugin))
        shown = ", ".join(_plugin_label(host, p) for p in implementers) or "none installed"
        out += ["", f"## `{name}`", "", "```python", f"def {name}{signature}", "```", "",
                _rst_to_md(_doc(fn)), "", f"Implemented by: {shown}.", ""]
        kind = kinds.get(name)
        if kind:
            names = sorted(c.name for c in host.contributions(kind))
            out.append(f"Contributes today: {', '.join(f'`{n}`' for n in names) or 'nothing'}.")
    return "\n".join(out) + "\n"


def _plain_signature(fn: Any) -> str:
    """``(cli: click.Group) -> None``: annotations as written (they are strings here)."""
    signature = inspect.signature(fn)
    params = ", ".join(
        name if p.annotation is inspect.Parameter.empty else f"{name}: {_type_name(p.annotation)}"
        for name, p in signature.parameters.items())
    returns = signature.return_annotation
    shown = "" if returns is inspect.Signature.empty else f" -> {_type_name(returns)}"
    return f"({params}){shown}"


# -- CLI ----------------------------------------------------------------------------------


def cli_page() -> str:
    from agent_env.cli.main import cli

    out = [
        "# CLI reference",
        "",
        "<!-- generated by docs/_gen/reference.py by walking the agent-env click group -->",
        "",
        "Generated by walking the `agent-env` command group when this guide was built, so "
        "commands that plugins add appear here too. Every command also answers `--help`.",
    ]
    _walk(cli, ["agent-env"], None, out)
    return "\n".join(out) + "\n"


def _walk(command: click.Command, path: list[str], parent: click.Context | None,
          out: list[str]) -> None:
    ctx = click.Context(command, info_name=path[-1], parent=parent, terminal_width=100,
                        max_content_width=100)
    level = "#" * min(len(path) + 1, 4)
    usage = command.get_usage(ctx).strip()
    help_text = textwrap.dedent(command.help or "").strip()
    out += ["", f"{level} `{' '.join(path)}`", "", "```text", usage, "```", ""]
    if help_text:
        out += [_escape_help(help_text), ""]
    rows = []
    for param in command.get_params(ctx):
        record = param.get_help_record(ctx)
        if record is None:
            if isinstance(param, click.Argument):
                rows.append(f"| `{param.human_readable_name}` | argument |")
            continue
        names, text = record
        if isinstance(param, click.Argument) and not text:
            text = "argument" + ("" if param.required else " (optional)")
        rows.append(f"| `{_cell(names)}` | {_cell(text)} |")
    if rows:
        out += ["| argument or option | |", "|---|---|", *rows]
    if isinstance(command, click.Group):
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            if sub is not None and not sub.hidden:
                _walk(sub, [*path, name], ctx, out)


def _escape_help(text: str) -> str:
    """click help is plain text: its paragraphs become Markdown paragraphs, and a block click
    keeps as written (marked with ``\\b``) stays preformatted."""
    out = []
    for paragraph in text.split("\n\n"):
        if paragraph.startswith("\b\n"):
            body = paragraph.removeprefix("\b\n")
            out.append("\n".join(f"    {line}" for line in body.splitlines()))
        else:
            plain = " ".join(line.strip() for line in paragraph.splitlines())
            out.append(html.escape(plain, quote=False).replace("*", "\\*"))
    return "\n\n".join(out)


PAGES: dict[str, Callable[[], str]] = {
    "reference/steps.md": steps_page,
    "reference/config.md": config_page,
    "reference/hooks.md": hooks_page,
    "reference/cli.md": cli_page,
}


# -- the MkDocs hook ----------------------------------------------------------------------


def on_files(files: Any, config: Any) -> Any:
    """Add the generated pages to the build (MkDocs calls this once per build)."""
    from mkdocs.structure.files import File

    for path, make in PAGES.items():
        files.append(File.generated(config, path, content=make()))
    return files


if __name__ == "__main__":
    print(PAGES[sys.argv[1]]() if len(sys.argv) > 1 else "\n".join(PAGES))
