"""One way to check a settings table: against the keyword parameters of what it configures.

Store backends (their factory), sandbox providers (``from_config``), runners and plugins (an
attrs settings class handed to :func:`build`) all declare their settings the same way, as
keyword parameters, so every table in ``.agentenv/config.toml`` is checked by the same rules:
an unknown key is named with the known ones, a missing required key is named, and a value the
target refuses (an attrs validator, a converter) becomes a one-line :class:`ConfigError` that
says which table to fix. A target taking ``**kwargs`` declares that it checks keys itself.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from agent_env.errors import ConfigError, UserError

T = TypeVar("T")


def parameters(target: Callable[..., Any]) -> tuple[set[str], set[str]] | None:
    """(accepted, required) keyword names of ``target``, or None when it takes ``**kwargs``."""
    import inspect  # not at import time: it costs several ms of CLI start-up

    try:
        signature = inspect.signature(target)
    except (TypeError, ValueError):
        return None
    accepted: set[str] = set()
    required: set[str] = set()
    for name, parameter in signature.parameters.items():
        if parameter.kind is inspect.Parameter.VAR_KEYWORD:
            return None
        if parameter.kind in (
            inspect.Parameter.KEYWORD_ONLY,
            inspect.Parameter.POSITIONAL_OR_KEYWORD,
        ):
            accepted.add(name)
            if parameter.default is inspect.Parameter.empty:
                required.add(name)
    return accepted, required


def check(
    target: Callable[..., Any],
    settings: Mapping[str, Any],
    *,
    where: str,
    what: str,
    injected: Iterable[str] = (),
) -> None:
    """Refuse unknown and missing keys of ``settings`` for ``target``, naming table and keys.

    ``injected`` are parameters the kernel fills itself (``state_root``): never unknown,
    never required from the user.
    """
    found = parameters(target)
    if found is None:
        return
    accepted, required = found
    injected = set(injected)
    unknown = sorted(set(settings) - accepted - injected)
    if unknown:
        known = ", ".join(sorted(accepted - injected)) or "none"
        raise ConfigError(
            f"{where} has unknown setting(s) {', '.join(unknown)} for {what} (known: {known})"
        )
    missing = sorted(required - set(settings) - injected)
    if missing:
        raise ConfigError(f"{where} needs {', '.join(missing)} for {what}")
    for key, value in settings.items():
        bad = _non_finite(value)
        if bad is not None:  # TOML reads inf, nan and 1e400 (as inf): no setting means them
            raise ConfigError(f"{where} {key} = {bad}: give a finite number")


def _non_finite(value: Any) -> float | None:
    """The first infinite or NaN float in ``value`` (tables and lists included), or None."""
    import math

    if isinstance(value, float):
        return None if math.isfinite(value) else value
    items = value.values() if isinstance(value, Mapping) else value if isinstance(
        value, list | tuple) else ()
    for item in items:
        found = _non_finite(item)
        if found is not None:
            return found
    return None


def build(
    target: Callable[..., T],
    settings: Mapping[str, Any],
    *,
    where: str,
    what: str,
    injected: Mapping[str, Any] | None = None,
) -> T:
    """Check ``settings`` for ``target`` and call it with them (plus ``injected`` values)."""
    injected = dict(injected or {})
    check(target, settings, where=where, what=what, injected=injected)
    found = parameters(target)
    extra = {k: v for k, v in injected.items() if found is None or k in found[0]}
    try:
        return target(**{**extra, **settings})
    except UserError:
        raise
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{where}: invalid setting for {what}: {exc}") from None
    except OSError as exc:  # a path it was given: a file, read-only, not permitted
        place = f" {exc.filename}" if exc.filename else ""
        raise ConfigError(f"{where}: {what} cannot use{place}: {exc.strerror or exc}; give it "
                          "a writable folder") from None
