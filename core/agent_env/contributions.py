"""Records that plugins return from the contribution hooks in :mod:`agent_env.hookspecs`."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs

STORE_KINDS = ("document", "object", "image", "secret")


@attrs.frozen
class StoreBackend:
    """A store backend: ``factory(**settings)`` builds it when config selects ``name``."""

    kind: str = attrs.field(validator=attrs.validators.in_(STORE_KINDS))
    name: str
    factory: Callable[..., Any]


@attrs.frozen
class BundleSource:
    """A bundle folder a plugin ships, listed by ``agent-env run`` and runnable by name."""

    name: str
    path: Path = attrs.field(converter=Path)
    aliases: tuple[str, ...] = attrs.field(default=(), converter=tuple)
