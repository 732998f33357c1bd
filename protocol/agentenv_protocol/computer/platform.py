"""The platform a driver runs on, and the predicates (``os``, ``distribution``, ``version``,
``arch``, ``display``) that pick a driver's method for an operation on it."""

from __future__ import annotations

import os
import platform as _platform
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

KEYS = ("os", "distribution", "version", "arch", "display")
_ARCH = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}
_OS = {"linux": "linux", "darwin": "macos", "win32": "windows"}


@attrs.frozen
class Platform:
    os: str | None = None
    distribution: str | None = None
    version: str | None = None
    arch: str | None = None
    display: str | None = None

    def as_dict(self) -> dict[str, str]:
        return {k: v for k in KEYS if (v := getattr(self, k)) is not None}


def detect(environ: Mapping[str, str] | None = None,
           os_release: Path = Path("/etc/os-release")) -> Platform:
    """This machine: its OS, on Linux ``/etc/os-release``'s ID and VERSION_ID and the display
    (``XDG_SESSION_TYPE``, else ``DISPLAY`` = x11, ``WAYLAND_DISPLAY`` = wayland)."""
    env = os.environ if environ is None else environ
    name = _OS.get(sys.platform, sys.platform)
    release: dict[str, str] = {}
    display = None
    if name == "linux":
        try:
            for line in os_release.read_text().splitlines():
                key, sep, value = line.partition("=")
                if sep:
                    release[key.strip()] = value.strip().strip("\"'")
        except OSError:
            pass
        session = (env.get("XDG_SESSION_TYPE") or "").lower()
        display = session if session in ("x11", "wayland") else (
            "x11" if env.get("DISPLAY") else "wayland" if env.get("WAYLAND_DISPLAY") else None)
    machine = _platform.machine().lower()
    return Platform(name, release.get("ID"), release.get("VERSION_ID"),
                    _ARCH.get(machine, machine or None), display)


def _each(value: Any) -> list[Any]:
    return [None] if value is None else [value] if isinstance(value, str) else list(value)


def supported(entry: Mapping[str, Any]) -> list[Platform]:
    """The platforms one ``supports`` entry names: ``{"os": {"type": "linux", "display":
    ["x11"]}, "arch": ["amd64", "arm64"]}`` names two."""
    system = entry.get("os")
    if not isinstance(system, Mapping) or not isinstance(system.get("type"), str):
        raise ValueError(f"a supports entry names its os as {{'type': ...}}, got {entry!r}")
    return [Platform(system["type"], dist, version, arch, display)
            for dist in _each(system.get("distribution"))
            for version in _each(system.get("version"))
            for display in _each(system.get("display")) for arch in _each(entry.get("arch"))]


def normalize(predicates: Mapping[str, Any]) -> dict[str, frozenset[str]]:
    unknown = sorted(set(predicates) - set(KEYS))
    if unknown:
        raise TypeError(f"unknown predicate(s) {unknown}; predicates are {list(KEYS)}")
    return {k: frozenset(_each(v)) for k, v in predicates.items()}


def matches(predicates: Mapping[str, frozenset[str]], running: Platform) -> bool:
    return all(getattr(running, key) in allowed for key, allowed in predicates.items())


def overlap(a: Mapping[str, frozenset[str]], b: Mapping[str, frozenset[str]]) -> bool:
    """Whether one platform could match both (no key both limit to disjoint values)."""
    return all(a[k] & b[k] for k in set(a) & set(b))
