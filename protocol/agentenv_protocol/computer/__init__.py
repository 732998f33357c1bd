"""The computer driver SDK (computer/v1): subclass :class:`ComputerDriverEnvironment`, mark the
methods that capture the screen and send input (:mod:`.operations`), and ``serve()`` it; the
base class serves the ``computer_*`` tools, the framework's extensions and the data plane.
``python -m agentenv_protocol.computer.conformance URL`` checks a running driver."""

from .driver import (
    COMPUTER,
    COMPUTER_DISPLAY,
    COMPUTER_EXEC,
    COMPUTER_KEYBOARD,
    COMPUTER_POINTER,
    COMPUTER_READY,
    COMPUTER_SPACES,
    DEFAULT_IDENTITY,
    ComputerDriverEnvironment,
    computer_driver,
)
from .errors import (
    BackgroundUnavailable,
    ComputerError,
    DeliveryFailed,
    DeviceUnavailable,
    InputBusy,
    Internal,
    InvalidArgument,
    LimitExceeded,
    OutOfBounds,
    PermissionDenied,
    StaleFrame,
    TargetUnavailable,
    Timeout,
    Unsupported,
)
from .operations import (
    Display,
    Effect,
    ExecResult,
    Image,
    ReadyCheck,
    capture,
    click,
    display,
    drag,
    key_down,
    key_up,
    pointer_down,
    pointer_move,
    pointer_position,
    pointer_up,
    press,
    run_in_session,
    scroll,
    set_display,
    type_text,
    write_files,
)
from .platform import Platform
from .settings import SETTINGS_ENV, ComputerSettings

__all__ = [
    "COMPUTER", "COMPUTER_DISPLAY", "COMPUTER_EXEC", "COMPUTER_KEYBOARD", "COMPUTER_POINTER",
    "COMPUTER_READY", "COMPUTER_SPACES", "DEFAULT_IDENTITY", "SETTINGS_ENV",
    "BackgroundUnavailable",
    "ComputerDriverEnvironment", "ComputerError", "ComputerSettings", "DeliveryFailed",
    "DeviceUnavailable", "Display", "Effect", "ExecResult", "Image", "InputBusy", "Internal",
    "InvalidArgument", "LimitExceeded", "OutOfBounds", "PermissionDenied", "Platform",
    "ReadyCheck", "StaleFrame", "TargetUnavailable", "Timeout", "Unsupported", "capture",
    "click", "computer_driver", "display", "drag", "key_down", "key_up", "pointer_down",
    "pointer_move", "pointer_position", "pointer_up", "press", "run_in_session", "scroll",
    "set_display", "type_text", "write_files",
]
