"""Records that plugins return from the contribution hooks in :mod:`agent_env.hookspecs`."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs

from agent_env._tuples import str_tuple

STORE_KINDS = ("document", "object", "image", "secret")


@attrs.frozen
class Lazy:
    """A contribution named now and imported when first used: ``Lazy("docker", "pkg.mod:Cls")``.

    Why: the CLI asks every plugin for its contributions at start-up, and importing every step,
    provider and store class (their modules, their attrs classes) costs more than the command
    itself. A ``Lazy`` costs nothing until a run looks that name up; ``plugin list`` shows it
    unimported and ``plugin check`` imports every one, so a broken target is still caught.
    Any contribution hook may return it in place of a class; a store backend's ``factory``
    may be one too.
    """

    name: str
    target: str = attrs.field()

    @target.validator
    def _module_colon_attribute(self, _: Any, value: str) -> None:
        if value.count(":") != 1:
            raise ValueError(f"Lazy target must be 'module:attribute', not {value!r}")

    def load(self) -> Any:
        return import_target(self.target)


def import_target(target: str) -> Any:
    """What ``module`` or ``module:attribute.path`` names (entry points and Lazy share it)."""
    import importlib

    module_name, _, attribute = target.partition(":")
    found: Any = importlib.import_module(module_name.strip())
    for part in filter(None, attribute.strip().split(".")):
        found = getattr(found, part)
    return found


@attrs.frozen
class StoreBackend:
    """A store backend: ``factory(**settings)`` builds it when config selects ``name``.

    ``factory`` may be a :class:`Lazy` (its ``name`` unused), imported when config selects it.
    """

    kind: str = attrs.field(validator=attrs.validators.in_(STORE_KINDS))
    name: str
    factory: Callable[..., Any] | Lazy


@attrs.frozen
class BundleSource:
    """A bundle folder a plugin ships, listed by ``agent-env run`` and runnable by name."""

    name: str
    path: Path = attrs.field(converter=Path)
    aliases: tuple[str, ...] = attrs.field(default=(), converter=str_tuple)


@attrs.frozen
class AgentSource:
    """An agent folder a plugin ships (``agent.toml`` and what its type needs)."""

    name: str
    path: Path = attrs.field(converter=Path)
    aliases: tuple[str, ...] = attrs.field(default=(), converter=str_tuple)


@attrs.frozen
class ModelProvider:
    """A model provider a plugin serves itself: models named ``<name>:<rest>`` are its own (the
    agents plugin's ``scripted``); any other model name goes to the configured upstream
    (``[model] base_url``)."""

    name: str
    description: str = ""


@attrs.frozen
class ImportReport:
    """What a bundle format's ``import_tasks`` did, when some tasks could not be imported:
    its lines (one per task imported, with notes), how many it imported, and each task it
    refused with why. Why not an exception: one task the format cannot honour must not cost
    a dataset's other tasks."""

    lines: tuple[str, ...] = attrs.field(default=(), converter=str_tuple)
    imported: int = 0
    refused: tuple[str, ...] = attrs.field(default=(), converter=str_tuple)
