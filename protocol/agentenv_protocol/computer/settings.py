"""The settings a driver reads at start: one JSON object in ``AGENTENV_COMPUTER_SETTINGS``."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping

import attrs
import cattrs

SETTINGS_ENV = "AGENTENV_COMPUTER_SETTINGS"
SPACES = ("frame", "norm")


@attrs.define
class ComputerSettings:
    """``data_paths`` (relative to the session user's home) are what ``data/get`` returns; the
    rest are the defaults the card reports."""

    data_paths: list[str] = attrs.field(factory=list)
    default_space: str = "frame"
    default_norm_scale: int = 1000
    queue_wait_s: float = 30.0
    tap_hold_ms: int = 50
    type_delay_ms: int = 10
    max_hold_ms: int = 10_000
    layout: str = "us"
    drag_duration_ms: int = 500
    exec_output_bytes: int = 1 << 20
    exec_timeout_s: float = 60.0

    def __attrs_post_init__(self) -> None:
        if self.default_space not in SPACES:
            raise ValueError(f"default_space is one of {SPACES}, not {self.default_space!r}")
        for path in self.data_paths:
            if path.startswith("/") or ".." in path.split("/"):
                raise ValueError(f"data_paths are relative to the home folder: {path!r}")


_CONVERTER = cattrs.Converter(forbid_extra_keys=True)


def load_settings(environ: Mapping[str, str] | None = None) -> ComputerSettings:
    raw = (os.environ if environ is None else environ).get(SETTINGS_ENV)
    if not raw:
        return ComputerSettings()
    try:
        return _CONVERTER.structure(json.loads(raw), ComputerSettings)
    except (ValueError, TypeError, cattrs.BaseValidationError) as exc:
        raise ValueError(f"{SETTINGS_ENV} is not valid computer settings: {exc}") from None
