"""The ``secretmanager`` secret store: one Secret Manager secret holding a bundle of secrets.

A team keeps its API keys as one JSON or YAML mapping in one secret (``gcloud secrets create
agentenv --data-file=secrets.yaml``), so one IAM binding and one API call serve them all. The
bundle is cached for ``ttl`` seconds; when a refresh fails (network, quota, an outage) the last
good bundle keeps being served and the failure is logged, so a blip in Secret Manager does not
fail a running job. Only a first load that fails raises.

Values never reach a log, an error message or ``repr``: errors name the secret and the failure,
and a malformed bundle is reported by its shape ("holds a list"), never by its content.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Mapping
from typing import Any

from agent_env.api import SecretStore, StoreError, UserError, bundle_value
from agentenv_gcp_stores.faults import (
    Backoff,
    MissingResource,
    denied,
    is_denied,
    is_not_found,
    load_credentials,
    message_of,
    retrying,
)

_RESOURCE = re.compile(r"^projects/(?P<project>[^/]+)/secrets/(?P<secret>[^/]+)$")
#: After a failed refresh, try again this soon (at most ``ttl``) rather than on every get.
RETRY_AFTER_FAILURE = 30.0
FORMATS = ("auto", "json", "yaml")


class SecretManagerSecretStore(SecretStore):
    """:class:`SecretStore` over one Secret Manager secret (see the module docstring).

    Settings (``[stores.secret]`` with ``backend = "secretmanager"``): ``secret`` (its id, with
    ``project``, or ``projects/P/secrets/S``), ``project``, ``version`` (default ``latest``),
    ``ttl`` (seconds a loaded bundle is served, default 300), ``format`` (``auto``, ``json`` or
    ``yaml``), ``endpoint`` (another API root, e.g. a local fake), ``credentials_file``,
    ``anonymous``, ``retries``. A name is looked up as a key of the bundle, then as a dotted path
    (``openai.key``); numbers and booleans come back as text.
    """

    def __init__(
        self,
        *,
        secret: str,
        project: str | None = None,
        version: str = "latest",
        ttl: float = 300.0,
        format: str = "auto",
        endpoint: str | None = None,
        credentials_file: str | None = None,
        anonymous: bool = False,
        retries: int = 5,
        credentials: Any = None,
    ) -> None:
        if not isinstance(secret, str) or not secret:
            raise UserError("[stores.secret] secret must name the Secret Manager secret to read")
        match = _RESOURCE.match(secret)
        if match:
            project, secret = match.group("project"), match.group("secret")
        elif "/" in secret:
            raise UserError(
                f"[stores.secret] secret must be an id or projects/P/secrets/S, not {secret!r}"
            )
        if format not in FORMATS:
            raise UserError(f"[stores.secret] format must be one of {', '.join(FORMATS)}")
        if float(ttl) < 0:
            raise UserError("[stores.secret] ttl must be >= 0 seconds")
        self.secret_id = secret
        self.project = project
        self.version = str(version)
        self.ttl = float(ttl)
        self.format = format
        self.endpoint = endpoint
        self.credentials_file = credentials_file
        self.anonymous = anonymous
        self.backoff = Backoff(attempts=max(1, int(retries)))
        self._credentials = credentials
        self._client: Any = None
        self._bundle: dict[str, Any] | None = None
        self._next_refresh = 0.0
        self._loaded_at = 0.0
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"SecretManagerSecretStore({self.resource!r}, version={self.version!r})"

    @property
    def resource(self) -> str:
        return f"projects/{self.project or '<default project>'}/secrets/{self.secret_id}"

    # -- the contract -----------------------------------------------------------------------

    def get(self, name: str) -> str | None:
        return bundle_value(self._current(), name)

    def close(self) -> None:
        client, self._client = self._client, None
        transport = getattr(client, "transport", None)
        if transport is not None:
            transport.close()

    # -- the cache --------------------------------------------------------------------------

    def _current(self) -> dict[str, Any]:
        now = time.monotonic()
        bundle = self._bundle
        if bundle is not None and now < self._next_refresh:
            return bundle
        with self._lock:
            if self._bundle is not None and time.monotonic() < self._next_refresh:
                return self._bundle
            try:
                self._bundle = self._load()
            except Exception as exc:
                if self._bundle is None:
                    raise
                self._next_refresh = time.monotonic() + min(self.ttl, RETRY_AFTER_FAILURE)
                _log().warning(
                    "secret bundle refresh failed; serving the last good bundle",
                    secret=self.resource,
                    age_seconds=round(time.monotonic() - self._loaded_at, 1),
                    error=f"{type(exc).__name__}: {message_of(exc)}",
                )
                return self._bundle
            self._loaded_at = time.monotonic()
            self._next_refresh = self._loaded_at + self.ttl
            return self._bundle

    def _load(self) -> dict[str, Any]:
        client = self._secret_client()
        name = f"projects/{self.project}/secrets/{self.secret_id}/versions/{self.version}"
        try:
            response = retrying(
                lambda: client.access_secret_version(name=name, retry=None, timeout=30),
                what=f"Secret Manager: read {self.resource}",
                backoff=self.backoff,
            )
        except Exception as exc:
            if is_not_found(exc):
                raise MissingResource(
                    f"the Secret Manager secret {self.resource} (version {self.version}) does "
                    f"not exist: create it with `gcloud secrets create {self.secret_id} "
                    f"--project {self.project} --data-file=secrets.yaml` (a JSON or YAML mapping)"
                ) from None
            if is_denied(exc):
                raise denied(
                    exc,
                    action="read",
                    resource=f"{self.resource} (version {self.version})",
                    permission="secretmanager.versions.access",
                ) from None
            raise
        data = bytes(response.payload.data)
        _check_crc32c(data, response.payload, self.resource)
        return self._parse(data)

    def _secret_client(self) -> Any:
        if self._client is None:
            from google.cloud import secretmanager

            credentials, project = self._credentials, None
            if credentials is None:
                credentials, project = load_credentials(
                    credentials_file=self.credentials_file, anonymous=self.anonymous
                )
            self.project = self.project or project
            if not self.project:
                raise UserError(
                    f'[stores.secret] needs project (or secret = "projects/P/secrets/'
                    f'{self.secret_id}"): no default project was found in the credentials'
                )
            options = {"api_endpoint": self.endpoint} if self.endpoint else None
            self._client = secretmanager.SecretManagerServiceClient(
                credentials=credentials, transport="rest", client_options=options
            )
        return self._client

    def _parse(self, data: bytes) -> dict[str, Any]:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise StoreError(f"the secret bundle {self.resource} is not UTF-8 text") from None
        stripped = text.lstrip()
        as_json = self.format == "json" or (self.format == "auto" and stripped.startswith("{"))
        try:
            if as_json:
                bundle = json.loads(text)
            else:
                import yaml

                bundle = yaml.safe_load(text) if stripped else {}
        except ValueError as exc:  # yaml.YAMLError is not a ValueError: caught below
            raise StoreError(
                f"the secret bundle {self.resource} is not valid JSON (line {_line(exc)})"
            ) from None
        except Exception as exc:
            if type(exc).__module__.startswith("yaml"):
                raise StoreError(
                    f"the secret bundle {self.resource} is not valid YAML ({type(exc).__name__})"
                ) from None
            raise
        if not isinstance(bundle, Mapping):
            raise StoreError(
                f"the secret bundle {self.resource} must hold a mapping of names to values, "
                f"not a {type(bundle).__name__}"
            )
        return dict(bundle)



def _line(exc: Exception) -> object:
    return getattr(exc, "lineno", "?")


def _check_crc32c(data: bytes, payload: Any, resource: str) -> None:
    """Refuse a payload whose checksum (when the service sent one) does not match."""
    expected = getattr(payload, "data_crc32c", None)
    if not expected:
        return
    try:
        import google_crc32c
    except ImportError:  # pragma: no cover - installed with google-cloud-storage
        return
    if google_crc32c.value(data) != int(expected):
        raise StoreError(f"the secret bundle {resource} arrived corrupted (crc32c mismatch)")


def _log() -> Any:
    from agent_env.api import get_logger

    return get_logger("gcp_stores.secretmanager")
