"""Finding a bundle: ``agent-env run NAME|PATH``, and the listing of installed bundles.

An existing folder, or text starting with ``.``, ``/`` or ``~``, is a path; anything else names
an installed bundle (one a plugin contributes through ``agent_env_bundles``) or its alias.
"""

from __future__ import annotations

from pathlib import Path

import attrs

from agent_env.bundles.model import installed_id_root, local_id_root
from agent_env.errors import UserError


@attrs.frozen
class InstalledBundle:
    name: str
    path: Path
    aliases: tuple[str, ...]
    distribution: str
    version: str

    @property
    def id_root(self) -> str:
        return installed_id_root(self.distribution, self.name)


@attrs.frozen
class BundleLocation:
    """Where a bundle is and the id root its entities get."""

    folder: Path
    id_root: str
    name: str


def installed_bundles() -> list[InstalledBundle]:
    """The bundles plugins ship, sorted by name (nothing in them is read)."""
    from agent_env.runtime import current

    host = current().host
    found = []
    for contribution in host.contributions("bundle"):
        if contribution.status != "active":
            continue
        record = host.record(contribution.plugin)
        source = contribution.obj
        found.append(InstalledBundle(
            source.name, Path(source.path), tuple(source.aliases),
            record.distribution if record else contribution.plugin,
            record.version if record else "?",
        ))
    return sorted(found, key=lambda b: b.name)


def looks_like_path(text: str) -> bool:
    return text.startswith((".", "/", "~")) or Path(text).is_dir()


def locate(text: str) -> BundleLocation:
    """The bundle ``text`` names, or a :class:`UserError` that says how to find one."""
    if looks_like_path(text):
        folder = Path(text).expanduser()
        if not folder.is_dir():
            raise UserError(f"{text} is not a folder")
        folder = folder.resolve()
        return BundleLocation(folder, local_id_root(folder), folder.name)
    for bundle in installed_bundles():
        if text == bundle.name or text in bundle.aliases:
            return BundleLocation(bundle.path, bundle.id_root, bundle.name)
    raise UserError(
        f"'{text}' is neither a folder nor an installed bundle "
        "(agent-env run lists the installed bundles)"
    )
