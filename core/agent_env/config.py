"""Configuration: one TOML file, ``AGENT_ENV_*`` variables and ``configure()`` in code.

Precedence, per value: built-in default < config file < ``AGENT_ENV_*`` variable < ``configure()``.
The file is ``AGENT_ENV_CONFIG`` (which must exist) or the first ``.agentenv/config.toml`` found
walking up from the working folder; with none, every backend takes its local default.

Values may be references, resolved when the config is loaded: ``env:NAME`` (an environment
variable) and ``secret:KEY`` (the configured secret store), each with an optional ``?default``.
Secrets never need to live in the file.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs

from agent_env.errors import ConfigError

CONFIG_ENV = "AGENT_ENV_CONFIG"
CONFIG_RELATIVE = Path(".agentenv") / "config.toml"

#: The backend each store kind uses when nothing says otherwise (all local, no cloud SDK).
DEFAULT_STORES = {"document": "sqlite", "object": "filesystem", "image": "local", "secret": "local"}

#: Variables that pick a backend, as in the reference.
ENV_VARIABLES = {
    "AGENT_ENV_DOCUMENT_STORE": ("stores", "document"),
    "AGENT_ENV_OBJECT_STORE": ("stores", "object"),
    "AGENT_ENV_IMAGE_STORE": ("stores", "image"),
    "AGENT_ENV_SECRET_STORE": ("stores", "secret"),
    "AGENT_ENV_RUNNER": ("runner", "impl"),
    "AGENT_ENV_SANDBOX": ("sandbox", "default"),
    "AGENT_ENV_MODEL_BASE_URL": ("model", "base_url"),
    "AGENT_ENV_MODEL_API_KEY": ("model", "api_key"),
    "AGENT_ENV_HUMAN_A2A_URL": ("conversations", "default_human_a2a_url"),
}
#: The model upstream as the host of a reference-framework user already names it: used only when
#: neither the config file nor an ``AGENT_ENV_*`` variable sets that key.
FALLBACK_VARIABLES = {
    "LITELLM_BASE_URL": ("model", "base_url"),
    "LITELLM_API_KEY": ("model", "api_key"),
}

#: Known sections and their known keys (None: any key, e.g. a plugin's own table).
KNOWN_KEYS: dict[str, set[str] | None] = {
    "stores": {"document", "object", "image", "secret"},
    "runner": {"impl", "max_concurrency", "config"},
    "sandbox": {"default", "agent_default", "providers"},
    "model": {"base_url", "api_key", "name", "default", "roles", "params", "headers"},
    "plugins": None,
    "state": {"root"},
    "agents": {"default", "default_a2a_agent_id"},
    "task_steps": {"impls"},
    "envs": {"impls", "network_policy"},
    "explorer": {"port", "allowed_hosts"},
    "conversations": {"default_human_a2a_url"},
}

#: The reference framework's config settings that are not read here, and why (a warning says
#: so when a config sets one, rather than the bare "unknown").
NOT_READ: dict[str, str] = {
    "artifacts": "artifact types come from plugins here (file artifacts are built in)",
    "state.providers": "env state types come from env types here (local_postgres, from the "
                       "mcp_env plugin); no provider class is configured",
    "explorer.cors_origins": "the explorer answers its own page only (a token in its URL)",
    "explorer.static_dir": "the explorer serves its own page",
    "explorer.plugins": "the explorer takes no plugins here",
}

_REFERENCE = re.compile(r"^(env|secret):([^?]*)(?:\?(.*))?$", re.DOTALL)
_SECRET_KEY = re.compile(
    r"(key|token|password|passwd|credential|secret_|_secret)$|^secret_", re.IGNORECASE
)

SecretLookup = Callable[[str], "str | None"]
#: sections whose ``secret:`` references are resolved where the stores are built, not here
_UNRESOLVED_SECTIONS = frozenset({"stores", "state"})


@attrs.frozen
class StoreChoice:
    """The backend chosen for one store kind and its settings table; ``impl`` when the config
    names a class to build as it is (``[stores.X] impl = "module:Class"``)."""

    kind: str
    backend: str
    settings: dict[str, Any] = attrs.field(factory=dict)
    impl: str | None = None


@attrs.frozen
class Config:
    """The configuration in effect: merged data plus where each section came from."""

    data: dict[str, Any]
    path: Path | None
    sources: dict[str, str]
    warnings: tuple[str, ...] = ()
    raw: dict[str, Any] = attrs.field(factory=dict)  # before references were resolved
    #: The secret store ``secret:`` references are read from (the runtime that loaded this
    #: config gives its own; None: this config cannot resolve them).
    secrets: Callable[[], Any] | None = attrs.field(default=None, eq=False, repr=False)

    def _table(self, name: str) -> dict[str, Any]:
        value = self.data.get(name, {})
        return value if isinstance(value, dict) else {}

    def section(self, name: str) -> dict[str, Any]:
        """The section ``name`` with every reference resolved: ``env:`` when the config was
        loaded, ``secret:`` here, with the configured secret store (a missing secret is a
        ConfigError naming it). ``[stores]`` and ``[state]`` keep their ``secret:``
        references: the secret store is built from them (see :func:`open_store`)."""
        value = self._table(name)
        if name in _UNRESOLVED_SECTIONS:
            return value
        return self.resolved(value, name)

    def resolved(self, value: Any, where: str) -> Any:
        """``value`` with its ``secret:`` references resolved: the one path every config value
        takes (stores, model, runner, sandbox providers, plugin tables)."""
        if not has_secret_reference(value):
            return value
        if self.secrets is None:
            raise ConfigError(f"[{where}] uses secret: references, which only a config loaded "
                              "by a runtime (agent_env.runtime.current().config) can resolve")
        return resolve_secrets(value, self.secrets().get, where=where)

    def store(self, kind: str) -> StoreChoice:
        """Which backend serves ``kind`` (``document``/``object``/``image``/``secret``)."""
        value = self.section("stores").get(kind, DEFAULT_STORES[kind])
        if isinstance(value, dict):
            if "impl" in value and "backend" not in value:  # the reference's shape
                from agent_env.stores.reference_impls import reference_choice

                backend, settings, impl = reference_choice(kind, value)
                return StoreChoice(kind, backend, settings, impl)
            settings = {k: v for k, v in value.items() if k != "backend"}
            return StoreChoice(kind, str(value.get("backend", DEFAULT_STORES[kind])), settings)
        return StoreChoice(kind, str(value))

    def sandbox_chain(self, *, agent: bool = False) -> list[str]:
        """The sandbox providers to try, in order (``[sandbox] default = "a,b"``)."""
        from agent_env.sandbox.chain import split_chain

        section = self._table("sandbox")  # names only: no provider's secrets are needed
        key = "agent_default" if agent and section.get("agent_default") else "default"
        value = section.get(key)
        chain = split_chain(str(value or "local"))
        if not chain:
            raise ConfigError(f"[sandbox] {key} = {value!r} names no sandbox provider; give "
                              "one or more names, such as \"local\" or \"docker,local\"")
        return chain

    def provider_settings(self, name: str) -> dict[str, Any]:
        providers = self._table("sandbox").get("providers", {})
        table = providers.get(name, {}) if isinstance(providers, dict) else {}
        config = table.get("config", {}) if isinstance(table, dict) else {}
        if not isinstance(config, dict):
            return {}
        return dict(self.resolved(config, f"sandbox.providers.{name}.config"))

    def plugin_tables(self) -> dict[str, dict[str, Any]]:
        return {k: self.resolved(v, f"plugins.{k}") for k, v in self._table("plugins").items()
                if isinstance(v, dict)}

    @property
    def state_root(self) -> Path:
        """Where local stores and work folders live (created 0700 on first use)."""
        explicit = self._table("state").get("root") or os.environ.get("AGENT_ENV_STATE_DIR")
        if explicit:
            root = Path(str(explicit)).expanduser()
        else:
            base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
            root = Path(base) / "agent-env"
        return ensure_private_dir(root)


#: Kernel filesystems: what looks like a folder or file there is the system's, not storage.
SYSTEM_ROOTS = ("/proc", "/sys", "/dev")


def system_folder(path: Path) -> str | None:
    """The kernel filesystem ``path`` lies in (``/proc``...), links resolved; None if none."""
    real = os.path.realpath(path)
    if real == "/dev/shm" or real.startswith("/dev/shm/"):  # a tmpfs for files: storage
        return None
    return next((root for root in SYSTEM_ROOTS
                 if real == root or real.startswith(root + "/")), None)


def ensure_private_dir(path: Path) -> Path:
    """Create ``path`` (and missing parents) with mode 0700 and return it; a path that cannot
    be a folder (a file is there, a read-only filesystem, no permission, a kernel filesystem
    such as ``/proc`` or ``/dev/null``) is a ConfigError naming it."""
    system = system_folder(path)
    if system is not None:
        raise ConfigError(f"{path} is in {system}, the system's, not a folder for files; set "
                          "AGENT_ENV_STATE_DIR ([state] root) to a folder of your own")
    if not path.is_dir():
        try:
            path.mkdir(parents=True, exist_ok=True, mode=0o700)
            path.chmod(0o700)
        except FileExistsError:
            raise ConfigError(f"{path} is a file, not a folder; remove it, or set "
                              "AGENT_ENV_STATE_DIR ([state] root) elsewhere") from None
        except OSError as exc:
            raise ConfigError(f"cannot make the folder {path}: {exc.strerror or exc}; set "
                              "AGENT_ENV_STATE_DIR ([state] root) to a writable folder") \
                from None
    return path


# -- finding and reading the file ---------------------------------------------------------


#: What named the config file, for messages: the variable, or ``--config`` when the command
#: line set it (it passes the path on through the variable).
named_by = CONFIG_ENV


def find_config_file(start: Path | None = None) -> Path | None:
    """``AGENT_ENV_CONFIG`` if set (it must exist), else the nearest ``.agentenv/config.toml``."""
    named = os.environ.get(CONFIG_ENV)
    if named:
        import stat

        path = Path(named).expanduser()
        undo = ("or give another path" if named_by != CONFIG_ENV else
                "or unset the variable to use .agentenv/config.toml")
        try:
            mode = path.stat().st_mode
        except FileNotFoundError:
            raise ConfigError(f"{named_by} names {path}, which does not exist (create it, "
                              f"{undo})") from None
        except OSError as exc:
            raise ConfigError(f"{named_by} names {path}, which cannot be read "
                              f"({exc.strerror or exc}); {undo}") from None
        if stat.S_ISDIR(mode):
            raise ConfigError(f"{named_by} names {path}, which is a folder; name the TOML file "
                              f"itself (such as {path / CONFIG_RELATIVE.name}), {undo}")
        if not stat.S_ISREG(mode):  # a FIFO would block the read, a device never end
            raise ConfigError(f"{named_by} names {path}, which is not a regular file; name a "
                              f"TOML file, {undo}")
        return path
    folder = (start or Path.cwd()).resolve()
    for candidate in (folder, *folder.parents):
        path = candidate / CONFIG_RELATIVE
        try:
            if path.is_file():
                return path
        except OSError as exc:  # an unreadable .agentenv/ above: say so, and look further up
            import sys

            sys.stderr.write(f"warning: skipping {path}: {exc.strerror or exc} (fix its "
                             f"permissions, or set {CONFIG_ENV})\n")
    return None


def loads_toml(text: str) -> dict[str, Any]:
    """TOML text as plain data, the one way every TOML file is read: a UTF-8 byte-order mark
    (as some editors save) is dropped, as the JSON readers drop it. Raises tomlkit's
    ParseError."""
    import tomlkit

    return tomlkit.parse(text.removeprefix("\ufeff")).unwrap()


def read_toml(path: Path) -> dict[str, Any]:
    """Parse a TOML file with tomlkit; an error names the file and line."""
    from tomlkit.exceptions import ParseError

    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        line = exc.object.count(b"\n", 0, exc.start) + 1
        raise ConfigError(f"{path}:{line}: not UTF-8 text (byte 0x{exc.object[exc.start]:02x});"
                          " save the file as UTF-8") from None
    try:
        return loads_toml(text)
    except ParseError as exc:
        raise ConfigError(
            f"{path}:{exc.line}: invalid TOML ({_parse_reason(exc)}); fix that line"
        ) from None


def _parse_reason(exc: Exception) -> str:
    text = str(exc)
    return re.sub(r"\s+at line \d+ col \d+$", "", text)


# -- merging ------------------------------------------------------------------------------



def load_config(
    path: Path | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
    secrets: SecretLookup | None = None,
) -> Config:
    """Merge defaults, the file, ``AGENT_ENV_*`` variables and overrides; resolve references."""
    environ = os.environ if environ is None else environ
    overrides = {} if overrides is None else overrides
    path = path if path is not None else find_config_file()
    data: dict[str, Any] = {"stores": dict(DEFAULT_STORES)}
    sources = {name: "default" for name in data}
    warnings: list[str] = []
    if path is not None:
        file_data = read_toml(path)
        warnings.extend(_check_shape(file_data, path))
        for name, value in file_data.items():
            data[name] = merge_value(data.get(name), value)
            sources[name] = f"file {path}"
    for variable, (section, key) in ENV_VARIABLES.items():
        if environ.get(variable):
            table = data.setdefault(section, {})
            table[key] = environ[variable]
            sources[section] = f"{sources.get(section, 'default')} + ${variable}"
    for variable, (section, key) in FALLBACK_VARIABLES.items():
        if environ.get(variable) and key not in data.get(section, {}):
            data.setdefault(section, {})[key] = environ[variable]
            sources[section] = f"{sources.get(section, 'default')} + ${variable}"
    for name, value in overrides.items():
        data[name] = merge_value(data.get(name), value)
        sources[name] = f"{sources.get(name, 'default')} + configure()"
    resolved = resolve_references(data, environ=environ, secrets=secrets)
    return Config(resolved, path, sources, tuple(warnings), raw=data)


def merge_value(base: Any, value: Any) -> Any:
    """``value`` over ``base``: tables merge key by key, anything else replaces."""
    return _deep_merge(base or {}, value) if isinstance(value, dict) else value


def _deep_merge(base: Any, extra: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base) if isinstance(base, dict) else {}
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def _check_shape(data: dict[str, Any], path: Path) -> list[str]:
    """Refuse sections that are not tables; warn about unknown sections and keys."""
    warnings = []
    for name, value in data.items():
        if name in NOT_READ:
            warnings.append(f"{path}: [{name}] is not read: {NOT_READ[name]}")
            continue
        if name not in KNOWN_KEYS:
            warnings.append(f"{path}: unknown section [{name}] is ignored")
            continue
        if not isinstance(value, dict):
            raise ConfigError(f"{path}: [{name}] must be a table, not {type(value).__name__}")
        known = KNOWN_KEYS[name]
        if known is None:
            continue
        for key in value:
            if f"{name}.{key}" in NOT_READ:
                warnings.append(f"{path}: [{name}] {key} is not read: {NOT_READ[name + '.' + key]}")
            elif key not in known:
                expected = ", ".join(sorted(known))
                warnings.append(f"{path}: unknown key '{key}' in [{name}] (known: {expected})")
    return warnings


# -- references ---------------------------------------------------------------------------


def resolve_references(
    value: Any,
    *,
    environ: Mapping[str, str] | None = None,
    secrets: SecretLookup | None = None,
    where: str = "",
    follow: bool = True,
) -> Any:
    """Replace ``env:NAME[?default]`` and ``secret:KEY[?default]`` strings, recursively; a
    value that is itself a reference is followed (``follow``), a loop refused.

    ``secret:`` references are left as written when no secret lookup is given (they are
    resolved when the backend that needs them is built, by :func:`resolve_secrets`).
    """
    environ = os.environ if environ is None else environ
    if isinstance(value, dict):
        return {
            k: resolve_references(v, environ=environ, secrets=secrets, where=_join(where, k))
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [
            resolve_references(v, environ=environ, secrets=secrets, where=f"{where}[{i}]")
            for i, v in enumerate(value)
        ]
    if not isinstance(value, str):
        return value
    match = _REFERENCE.match(value)
    if match is None:
        return value
    scheme, name, default = match.groups()
    if scheme == "env":
        found = environ.get(name)
    elif secrets is None:
        return value
    else:
        found = secrets(name)
    if found is None:
        if default is not None:
            return default
        fix = (
            f"export {name}=..." if scheme == "env" else f"add '{name}' to the secret store"
        )
        raise ConfigError(
            f"{where or 'config'}: '{value}' is not set ({fix}, or give a default: "
            f"'{scheme}:{name}?DEFAULT')"
        )
    if follow and _REFERENCE.match(found):  # a reference to a reference: follow, no loops
        return _follow(found, value, environ, secrets, where)
    return found


#: How many references one value may go through (``env:A`` -> ``env:B`` -> ...).
MAX_REFERENCE_HOPS = 10


def _follow(found: str, first: str, environ: Mapping[str, str], secrets: SecretLookup | None,
            where: str) -> Any:
    chain = [first]
    while _REFERENCE.match(found):
        if found in chain or len(chain) >= MAX_REFERENCE_HOPS:
            loop = " -> ".join([*chain, found])
            raise ConfigError(f"{where or 'config'}: the references {loop} never reach a value "
                              "(a loop, or more than 10); make one of them a plain value")
        chain.append(found)
        resolved = resolve_references(found, environ=environ, secrets=secrets, where=where,
                                      follow=False)
        if resolved == found:  # a secret: reference left for later
            return found
        found = resolved
    return found


def has_secret_reference(value: Any) -> bool:
    """Whether ``value`` (a table, list or string) holds a ``secret:`` reference anywhere."""
    if isinstance(value, dict):
        return any(has_secret_reference(v) for v in value.values())
    if isinstance(value, list):
        return any(has_secret_reference(v) for v in value)
    return isinstance(value, str) and value.startswith("secret:")


def resolve_secrets(value: Any, lookup: SecretLookup, where: str = "") -> Any:
    """Resolve the ``secret:`` references left in a settings table, with ``lookup``."""
    return resolve_references(value, secrets=lookup, where=where)


def _join(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


def mask(value: Any, key: str = "") -> Any:
    """A copy safe to print: values under secret-looking keys are masked, references kept."""
    if isinstance(value, dict):
        return {k: mask(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [mask(v, key) for v in value]
    if isinstance(value, str) and _SECRET_KEY.search(key) and not _REFERENCE.match(value):
        return "****" if value else value
    return value
