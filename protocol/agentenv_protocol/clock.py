"""Virtual time for clock/v1: ``t0 + real elapsed x rate`` once armed."""

from __future__ import annotations

import datetime as dt
import time
from typing import Any

CLOCK_URI = "urn:agentenv:clock/v1"
MAX_RATE = 86400.0


class ClockError(ValueError):
    """A ``set-time`` body we cannot use."""


def parse_rfc3339(text: Any) -> dt.datetime:
    """An RFC 3339 timestamp (``Z`` accepted); a naive one is taken as UTC."""
    if not isinstance(text, str):
        raise ClockError("virtual_time must be an RFC 3339 string")
    value = text.strip()
    if value.endswith(("Z", "z")):
        value = value[:-1] + "+00:00"
    try:
        parsed = dt.datetime.fromisoformat(value)
    except ValueError:
        raise ClockError(f"virtual_time {text!r} is not RFC 3339") from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)


class VirtualClock:
    """A clock the gateway arms with ``PUT /clock/set-time`` and clears with ``/clock/clear``."""

    def __init__(self) -> None:
        self.t0: dt.datetime | None = None
        self.rate = 1.0
        self._real0 = 0.0

    @property
    def armed(self) -> bool:
        return self.t0 is not None

    def set_time(self, virtual_time: Any, rate: Any = None) -> None:
        t0 = parse_rfc3339(virtual_time)
        if rate is None:
            rate = 1.0
        if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not (
                0 <= rate <= MAX_RATE):
            raise ClockError(f"virtual_seconds_per_real_second must be within 0..{MAX_RATE:g}")
        self.t0, self.rate, self._real0 = t0, float(rate), time.monotonic()

    def clear(self) -> None:
        self.t0 = None
        self.rate = 1.0

    def now(self) -> dt.datetime | None:
        """Current virtual time, or None while unarmed."""
        if self.t0 is None:
            return None
        return self.t0 + dt.timedelta(seconds=(time.monotonic() - self._real0) * self.rate)

    def now_iso(self) -> str | None:
        now = self.now()
        return now.isoformat() if now else None

    def state(self, env_get_time_url: str | None) -> dict[str, Any]:
        return {
            "armed": self.armed,
            "t0": self.t0.isoformat() if self.t0 else None,
            "virtual_seconds_per_real_second": self.rate,
            "virtual_time": self.now_iso(),
            "env_get_time_url": env_get_time_url,
        }
