"""The computer contract's errors, each one code of its table, raised by drivers and tools:
``raise OutOfBounds("...")``. A tool raising one answers an ``isError`` result naming the code;
an extension, its HTTP status."""

from __future__ import annotations

from typing import ClassVar

from ..errors import AgentEnvError


class ComputerError(AgentEnvError):
    """Base: a subclass fixes the code, status, retryability and whether it may have acted."""

    CODE: ClassVar[str] = "internal"
    STATUS: ClassVar[int] = 500
    RETRYABLE: ClassVar[bool] = False
    APPLIED: ClassVar[str] = "unknown"

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(self.CODE, message, retryable=self.RETRYABLE, applied=self.APPLIED,
                         hint=hint, status=self.STATUS)


def _error(name: str, code: str, status: int, *, retryable: bool = False,
           applied: str = "no") -> type[ComputerError]:
    return type(name, (ComputerError,), {"CODE": code, "STATUS": status,
                                         "RETRYABLE": retryable, "APPLIED": applied,
                                         "__doc__": f"``{code}`` (HTTP {status})."})


InvalidArgument = _error("InvalidArgument", "invalid_argument", 400)
OutOfBounds = _error("OutOfBounds", "out_of_bounds", 400)
StaleFrame = _error("StaleFrame", "stale_frame", 409, retryable=True)
InputBusy = _error("InputBusy", "input_busy", 409, retryable=True)
PermissionDenied = _error("PermissionDenied", "permission_denied", 403)
Unsupported = _error("Unsupported", "unsupported", 501)
BackgroundUnavailable = _error("BackgroundUnavailable", "background_unavailable", 501)
TargetUnavailable = _error("TargetUnavailable", "target_unavailable", 404)
DeviceUnavailable = _error("DeviceUnavailable", "device_unavailable", 503, retryable=True)
LimitExceeded = _error("LimitExceeded", "limit_exceeded", 429, retryable=True)
Timeout = _error("Timeout", "timeout", 504, applied="unknown")
DeliveryFailed = _error("DeliveryFailed", "delivery_failed", 502, applied="unknown")
Internal = _error("Internal", "internal", 500, applied="unknown")
