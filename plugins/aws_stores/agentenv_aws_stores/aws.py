"""What every AWS store shares: connection settings, client building and error translation.

boto3 is imported inside functions only: the plugin module is imported by every ``agent-env``
start, and boto3 costs ~100 ms to import.

Retries: clients use botocore's ``standard`` retry mode (exponential backoff with jitter), which
retries throttling (``ThrottlingException``, ``ProvisionedThroughputExceededException``,
``SlowDown``, ...), 5xx answers and dropped connections. A retried write may have happened the
first time, so each store marks its writes with a token and recognises its own write when the
retry is refused (see ``S3ObjectStore.put`` and ``DynamoDocumentStore``).
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Callable
from typing import Any, NoReturn

import attrs

from agent_env.api import StoreError, UserError

#: Error codes AWS services use for "these credentials may not do that".
ACCESS_DENIED_CODES = frozenset(
    {
        "AccessDenied",
        "AccessDeniedException",
        "UnauthorizedOperation",
        "AuthorizationError",
        "Forbidden",
        "403",
        "AllAccessDisabled",
        "InvalidAccessKeyId",
        "InvalidClientTokenId",
        "UnrecognizedClientException",
        "SignatureDoesNotMatch",
        "ExpiredToken",
        "ExpiredTokenException",
    }
)

_CLIENT_LOCK = threading.Lock()  # botocore's loaders are not safe to build clients in parallel
#: Where the runtime keeps this plugin's boto3 sessions (``current().state``).
SESSIONS_STATE = "agentenv_aws_stores.sessions"
#: Every live :class:`AwsClient`, so a forked child can give each a fresh lock and client.
_HOLDERS: weakref.WeakSet[AwsClient] = weakref.WeakSet()


class AwsStoreError(UserError, StoreError):
    """An AWS store problem the user fixes outside the code (a resource, a permission)."""


class ResourceMissing(AwsStoreError):
    """A bucket, table, secret or repository that does not exist (and was not to be created)."""


class AccessDenied(AwsStoreError):
    """The credentials in use may not perform ``action`` on ``resource``."""

    def __init__(self, action: str, resource: str, code: str, detail: str) -> None:
        super().__init__(
            f"access denied: {action} on {resource} ({code}"
            + (f": {detail}" if detail else "")
            + f"); allow {action} on it for the AWS identity in use",
            notes=[
                "credentials come from [stores.<kind>] access_key_id/secret_access_key "
                "(as env:/secret: references), a profile, or the SDK's default chain"
            ],
        )
        self.action, self.resource, self.code = action, resource, code


@attrs.frozen
class AwsSettings:
    """Where and as whom to call AWS; the secrets never appear in a repr."""

    region: str | None = None
    endpoint_url: str | None = None
    profile: str | None = None
    access_key_id: str | None = attrs.field(default=None, repr=False)
    secret_access_key: str | None = attrs.field(default=None, repr=False)
    session_token: str | None = attrs.field(default=None, repr=False)
    max_attempts: int = 6
    connect_timeout: float = 10.0
    read_timeout: float = 60.0

    def __attrs_post_init__(self) -> None:
        if bool(self.access_key_id) != bool(self.secret_access_key):
            raise UserError(
                "AWS credentials need both access_key_id and secret_access_key "
                "(or neither, to use the SDK's default chain)"
            )
        if self.max_attempts < 1:
            raise UserError(f"max_attempts must be at least 1, not {self.max_attempts}")

    def client(self, service: str, **config: Any) -> Any:
        """A boto3 client for ``service`` with retries, timeouts and these credentials."""
        import boto3
        from botocore.config import Config

        options = Config(
            retries={"mode": "standard", "max_attempts": self.max_attempts},
            connect_timeout=self.connect_timeout,
            read_timeout=self.read_timeout,
            **config,
        )
        from agent_env.api import current

        with _CLIENT_LOCK:
            # one per profile and process, kept by the runtime (reset() forgets them): a new
            # session reloads every service model
            sessions = current().state.setdefault(SESSIONS_STATE, {})
            key = (self.profile, os.getpid())
            session = sessions.get(key)
            if session is None:
                session = sessions[key] = boto3.session.Session(profile_name=self.profile)
            region = self.region or session.region_name
            if region is None:
                raise UserError(
                    f"no AWS region for the {service} store: set region in its [stores.<kind>] "
                    "table, or AWS_REGION / AWS_DEFAULT_REGION, or a profile with a region"
                )
            return session.client(
                service,
                region_name=region,
                endpoint_url=self.endpoint_url or None,
                aws_access_key_id=self.access_key_id or None,
                aws_secret_access_key=self.secret_access_key or None,
                aws_session_token=self.session_token or None,
                config=options,
            )


class AwsClient:
    """One store's boto3 client for one service: the one way the four AWS stores hold it.

    Why a holder: building a client is not thread-safe (botocore's loaders), so it is built once
    under a lock however many threads ask first; a client (its connection pool) must not cross a
    ``fork``, so a child builds its own. ``prepare(client)`` runs once per client built, still
    under the lock (the S3 store checks its bucket, DynamoDB its table); a ``prepare`` that
    raises leaves nothing behind, so the next use tries again.
    """

    def __init__(
        self,
        settings: AwsSettings,
        service: str,
        *,
        prepare: Callable[[Any], None] | None = None,
        **config: Any,
    ) -> None:
        """``config`` goes to botocore's ``Config`` (``signature_version``, ``s3``)."""
        self.settings = settings
        self.service = service
        self.config = config
        self.prepare = prepare
        self._lock = threading.Lock()
        self._client: Any = None
        self._pid = 0  # the process that built _client
        self._prepared = False
        _HOLDERS.add(self)

    def get(self) -> Any:
        """The client, built (or built again, in a forked child) and prepared on first use."""
        with self._lock:
            if self._client is None or self._pid != os.getpid():
                self._client = self.settings.client(self.service, **self.config)
                self._pid = os.getpid()
                self._prepared = False
            if not self._prepared:
                if self.prepare is not None:
                    self.prepare(self._client)
                self._prepared = True
            return self._client

    def recheck(self) -> None:
        """Run ``prepare`` again on next use (the bucket or table went away under us)."""
        with self._lock:
            self._prepared = False

    def close(self) -> None:
        """Close the client (only this process's: a parent's sockets are not ours to close)."""
        with self._lock:
            if self._client is not None and self._pid == os.getpid():
                self._client.close()
            self._client = None
            self._prepared = False

    def _forked(self) -> None:
        # The only thread in the child: a lock another thread held at fork would never be
        # released here, and the parent's client must not be used (its sockets are shared).
        self._lock = threading.Lock()
        self._client = None
        self._prepared = False


class AwsClientUser:
    """What every AWS store has: ``client`` (from its :class:`AwsClient`) and ``close``."""

    _clients: AwsClient

    @property
    def client(self) -> Any:
        """The boto3 client, made on first use (and again in a forked child), prepared."""
        return self._clients.get()

    def close(self) -> None:
        self._clients.close()


def _after_fork_in_child() -> None:
    global _CLIENT_LOCK
    _CLIENT_LOCK = threading.Lock()
    for holder in list(_HOLDERS):
        holder._forked()


if hasattr(os, "register_at_fork"):  # not on Windows, which cannot fork
    os.register_at_fork(after_in_child=_after_fork_in_child)


def error_code(exc: BaseException) -> str:
    """The AWS error code of a botocore ``ClientError`` (``""`` for anything else)."""
    response = getattr(exc, "response", None)
    if not isinstance(response, dict):
        return ""
    return str(response.get("Error", {}).get("Code", ""))


def error_message(exc: BaseException) -> str:
    """AWS's message on one line (an unparsed XML error body is reduced to its <Message>)."""
    import re

    response = getattr(exc, "response", None)
    text = str(exc) if not isinstance(response, dict) else str(
        response.get("Error", {}).get("Message", "")
    )
    found = re.search(r"<Message>(.*?)</Message>", text, re.S)
    if found:
        text = found.group(1)
    text = " ".join(text.split())
    return text if len(text) <= 300 else text[:297] + "..."


def http_status(exc: BaseException) -> int:
    response = getattr(exc, "response", None)
    if not isinstance(response, dict):
        return 0
    return int(response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)


def is_access_denied(exc: BaseException) -> bool:
    return error_code(exc) in ACCESS_DENIED_CODES


def raise_for(exc: BaseException, action: str, resource: str) -> NoReturn:
    """Re-raise a botocore error as the store error a caller can act on.

    Access denied becomes :class:`AccessDenied` naming ``action`` and ``resource``; missing
    credentials and unreachable endpoints become one-line :class:`AwsStoreError`; anything else
    becomes a :class:`StoreError` carrying the AWS code and message.
    """
    from botocore import exceptions as bx

    if is_access_denied(exc):
        raise AccessDenied(action, resource, error_code(exc), error_message(exc)) from None
    if isinstance(exc, bx.NoCredentialsError | bx.PartialCredentialsError):
        raise AwsStoreError(
            f"no AWS credentials for {action} on {resource}: configure the SDK's default chain "
            "(AWS_PROFILE, AWS_ACCESS_KEY_ID, an instance role) or set access_key_id and "
            "secret_access_key as env:/secret: references in the store's settings"
        ) from None
    if isinstance(exc, bx.EndpointConnectionError | bx.ConnectTimeoutError):
        raise AwsStoreError(f"cannot reach AWS for {action} on {resource}: {exc}") from None
    if isinstance(exc, bx.ClientError):
        raise StoreError(
            f"{action} on {resource} failed: {error_code(exc)}: {error_message(exc)}"
        ) from exc
    raise exc
