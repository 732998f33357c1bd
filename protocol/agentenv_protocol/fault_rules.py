"""What set-errors/v1 (:mod:`.faults`) left on an env, as the server reads it on every tool
call: kept apart from :mod:`.faults` so the server needs nothing of the env SDK for it."""

from __future__ import annotations

from typing import Any

import attrs

DEFAULT_ERROR_TYPE = "injected_error"


@attrs.frozen
class Fault:
    """What a call of one tool suffers: a wait, then a failure ``error_rate`` of the time."""

    error_rate: float
    error_type: str = DEFAULT_ERROR_TYPE
    delay_seconds: float = 0.0


def injected(env: Any, name: str) -> Fault | None:
    """The fault a call of ``name`` suffers in ``env``, or None (also for envs without
    set-errors/v1)."""
    faults = env.__dict__.get("_agentenv_faults") if hasattr(env, "__dict__") else None
    return faults.get(name) if faults else None


def strikes(env: Any, fault: Fault) -> bool:
    """Whether this call of a faulty tool fails (``error_rate`` of the time)."""
    return fault.error_rate >= 1 or float(env.agentenv_fault_roll()) < fault.error_rate
