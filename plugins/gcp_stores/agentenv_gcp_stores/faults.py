"""What goes wrong talking to Google Cloud, turned into errors a user can act on, and retries.

Every store here calls the Google libraries with their own retries turned off and goes through
:func:`retrying` instead, so that one policy (exponential backoff with full jitter, a bounded
number of attempts) covers Cloud Storage, Secret Manager and Firestore alike, and so that a store
knows when a write it sent may already have happened (it then checks instead of repeating it
blindly: see ``put`` in :mod:`.gcs` and ``insert`` in :mod:`.firestore`).

Only the standard library is imported at module level; the ``google.api_core`` exception classes
are looked up by name when an error is classified.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Any, TypeVar

import attrs

from agent_env.api import StoreError, UserError

T = TypeVar("T")

#: ``google.api_core.exceptions`` classes (and transport errors) worth another attempt.
_TRANSIENT_NAMES = frozenset(
    {
        "TooManyRequests",
        "ResourceExhausted",
        "InternalServerError",
        "BadGateway",
        "ServiceUnavailable",
        "GatewayTimeout",
        "DeadlineExceeded",
        "Aborted",
        "Unknown",
        # transports: requests / urllib3 / google-auth
        "ConnectionError",
        "ConnectTimeout",
        "ReadTimeout",
        "Timeout",
        "ChunkedEncodingError",
        "ProtocolError",
        "TransportError",
        "RemoteDisconnected",
    }
)


class MissingResource(UserError, StoreError):
    """The bucket, secret, database or repository a store is configured with does not exist."""


class AccessDenied(UserError, StoreError, PermissionError):
    """The credentials in use may not do this action on this resource."""

    def __init__(self, message: str, *, resource: str = "", action: str = "") -> None:
        super().__init__(message)
        self.resource = resource
        self.action = action

    def __str__(self) -> str:  # PermissionError's own __str__ would print the errno tuple
        return str(self.args[0])


class GaveUp(StoreError):
    """A call kept failing with transient errors after every attempt."""


def _names(exc: BaseException) -> set[str]:
    return {cls.__name__ for cls in type(exc).__mro__}


def is_transient(exc: BaseException) -> bool:
    """Whether ``exc`` is worth retrying: throttling, 5xx, timeouts and dropped connections."""
    if isinstance(exc, TimeoutError | ConnectionError):
        return True
    return bool(_names(exc) & _TRANSIENT_NAMES)


def is_not_found(exc: BaseException) -> bool:
    return "NotFound" in _names(exc)


_REFUSED = frozenset({"Unauthorized", "Unauthenticated", "RefreshError", "InvalidOperation"})


def is_denied(exc: BaseException) -> bool:
    """403/401, or google-auth unable to (re)authenticate (a refused key, anonymous on a 401)."""
    return bool(_names(exc) & ({"Forbidden", "PermissionDenied"} | _REFUSED))


def is_precondition_failed(exc: BaseException) -> bool:
    return bool(_names(exc) & {"PreconditionFailed", "FailedPrecondition"})


def is_already_exists(exc: BaseException) -> bool:
    return bool(_names(exc) & {"AlreadyExists", "Conflict"})


def message_of(exc: BaseException) -> str:
    """The server's message without the library's status prefix, on one line."""
    text = getattr(exc, "message", None) or str(exc)
    return " ".join(str(text).split())


def denied(exc: BaseException, *, action: str, resource: str, permission: str = "") -> AccessDenied:
    """An :class:`AccessDenied` naming the resource and the action (and the IAM permission)."""
    needs = f" (needs {permission})" if permission else ""
    unauthenticated = bool(_names(exc) & _REFUSED)
    reason = "the credentials were refused" if unauthenticated else "permission denied"
    return AccessDenied(
        f"{reason}: cannot {action} {resource}{needs}: {message_of(exc)}",
        resource=resource,
        action=action,
    )


@attrs.frozen
class Backoff:
    """How often and how patiently to retry a transient failure (full-jitter exponential)."""

    attempts: int = 5
    base: float = 0.2
    cap: float = 5.0

    def delay(self, attempt: int) -> float:
        return random.uniform(0, min(self.cap, self.base * 2**attempt))


def retrying(
    call: Callable[[], T],
    *,
    what: str,
    backoff: Backoff,
    on_retry: Callable[[BaseException], None] | None = None,
) -> T:
    """``call()``, retried on transient errors; other errors propagate unchanged at once.

    ``on_retry`` sees each transient error before the next attempt (a write uses it to note
    that its request may already have taken effect).
    """
    for attempt in range(backoff.attempts):
        try:
            return call()
        except Exception as exc:
            if not is_transient(exc):
                raise
            if attempt == backoff.attempts - 1:
                raise GaveUp(
                    f"{what}: gave up after {backoff.attempts} attempts: "
                    f"{type(exc).__name__}: {message_of(exc)}"
                ) from exc
            if on_retry is not None:
                on_retry(exc)
            time.sleep(backoff.delay(attempt))
    raise AssertionError("unreachable")  # pragma: no cover


def load_credentials(
    *,
    credentials_file: str | None = None,
    anonymous: bool = False,
    scopes: tuple[str, ...] = ("https://www.googleapis.com/auth/cloud-platform",),
) -> tuple[Any, str | None]:
    """``(credentials, project)`` from a key file, anonymous (emulators) or the default chain.

    The default chain is google-auth's: ``GOOGLE_APPLICATION_CREDENTIALS``, gcloud's application
    default credentials, then the metadata server. A missing or unreadable key file is a one-line
    :class:`UserError` naming it.
    """
    if anonymous:
        from google.auth.credentials import AnonymousCredentials

        return AnonymousCredentials(), None
    import google.auth
    from google.auth import exceptions as auth_errors

    if credentials_file:
        return _credentials_from_file(credentials_file, scopes)
    try:
        return google.auth.default(scopes=list(scopes))
    except auth_errors.DefaultCredentialsError:
        raise UserError(
            "no Google credentials found: run `gcloud auth application-default login`, set "
            "GOOGLE_APPLICATION_CREDENTIALS to a service-account key, or set credentials_file "
            "in the store's settings"
        ) from None


def _credentials_from_file(path: str, scopes: tuple[str, ...]) -> tuple[Any, str | None]:
    """A service-account or authorized-user key file (the two kinds gcloud writes)."""
    import json

    try:
        info = json.loads(open(path, encoding="utf-8").read())
        kind = info.get("type")
        if kind == "service_account":
            from google.oauth2 import service_account

            credentials = service_account.Credentials.from_service_account_info(
                info, scopes=list(scopes)
            )
            return credentials, info.get("project_id")
        if kind == "authorized_user":
            from google.oauth2.credentials import Credentials

            return Credentials.from_authorized_user_info(info, scopes=list(scopes)), None
    except (OSError, ValueError, KeyError) as exc:
        raise UserError(f"cannot load Google credentials from {path}: {message_of(exc)}") from None
    raise UserError(
        f"cannot load Google credentials from {path}: its type is {kind!r}; use a "
        "service-account key ('service_account') or gcloud's 'authorized_user' file, or leave "
        "credentials_file unset to use the default chain (GOOGLE_APPLICATION_CREDENTIALS)"
    )
