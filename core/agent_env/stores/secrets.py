"""The local secret store: environment variables, then config values, then a YAML/JSON file.

Settings (``[stores.secret]``): ``values = {name = "..."}`` (plain values, for tests and
throw-away setups), ``file = "~/.config/agent-env/secrets.yaml"`` (a mapping; YAML is a superset
of JSON so either format works; nested mappings are reached with dotted names such as
``db.password``) and ``use_environment = false`` to ignore environment variables (hermetic tests).

A name is looked up in the environment as written and then upper-cased with ``-`` and ``.`` as
``_`` (``openai_api_key`` finds ``OPENAI_API_KEY``). The file is re-read when it changes, so a
long-running process picks up a rotated secret. Values are never logged.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agent_env.errors import ConfigError
from agent_env.stores.base import SecretStore


def environment_names(name: str) -> list[str]:
    """The variable names tried for secret ``name``: as written, then ``UPPER_SNAKE``."""
    upper = re.sub(r"[^A-Za-z0-9_]", "_", name).upper()
    return [name] if upper == name else [name, upper]


def bundle_value(table: Mapping[str, Any], name: str) -> str | None:
    """``name`` in a secret bundle (a key, else a dotted path); text for scalars, else None.

    Every secret store that keeps a bundle of values (local file, Secrets Manager, Secret
    Manager) reads names the same way through this.
    """
    if name in table:
        value: Any = table[name]
    else:
        value = table
        for part in name.split("."):
            if not isinstance(value, Mapping) or part not in value:
                return None
            value = value[part]
    if value is None or isinstance(value, Mapping | list):
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


class LocalSecretStore(SecretStore):
    """:class:`SecretStore` over the process environment, config values and a file."""

    def __init__(
        self,
        *,
        values: Mapping[str, Any] | None = None,
        file: str | os.PathLike[str] | None = None,
        use_environment: bool = True,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        if values is not None and not isinstance(values, Mapping):
            raise ConfigError("[stores.secret] values must be a table of name = value")
        self.values = dict(values or {})
        self.file = Path(file).expanduser() if file else None
        if self.file is not None and not self.file.is_file():
            raise ConfigError(
                f"[stores.secret] file names {self.file}, which does not exist "
                "(create it as a YAML or JSON mapping of name: value, or remove the setting)"
            )
        self.use_environment = use_environment
        self._environ = environ
        self._lock = threading.Lock()
        self._file_state: tuple[int, int] | None = None
        self._file_values: dict[str, Any] = {}

    def get(self, name: str) -> str | None:
        if not isinstance(name, str) or not name:
            return None
        if self.use_environment:
            environ = os.environ if self._environ is None else self._environ
            for variable in environment_names(name):
                if variable in environ:
                    return environ[variable]
        found = bundle_value(self.values, name)
        if found is not None:
            return found
        if self.file is not None:
            return bundle_value(self._read_file(), name)
        return None

    def _read_file(self) -> dict[str, Any]:
        assert self.file is not None
        try:
            stat = self.file.stat()
        except FileNotFoundError:
            return {}
        state = (stat.st_mtime_ns, stat.st_size)
        with self._lock:
            if state != self._file_state:
                self._file_values = self._parse(self.file.read_text(encoding="utf-8"))
                self._file_state = state
            return self._file_values

    def _parse(self, text: str) -> dict[str, Any]:
        import yaml

        try:
            data = yaml.safe_load(text) if text.strip() else {}
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f"{self.file}:{mark.line + 1}" if mark is not None else str(self.file)
            # Only the position is reported: the text around it may be a secret.
            raise ConfigError(f"{where}: the secrets file is not valid YAML/JSON") from None
        if not isinstance(data, dict):
            raise ConfigError(f"{self.file}: the secrets file must be a mapping of name: value")
        return data
