"""The Secrets Manager secret store (``[stores] secret = "secretsmanager"``).

One AWS secret holds a *bundle*: a JSON or YAML mapping of name -> value (nested mappings are
reached with dotted names, ``db.password``). One secret for all of a team's keys keeps the AWS
bill and the IAM policy small, and rotating a key is one edit.

Settings (``[stores.secret]``): ``secret_id`` (name or ARN, required), ``ttl`` (seconds a
fetched bundle is served from memory, default 300), ``retry_after`` (seconds before trying
again after a failed refresh, default 30), ``version_stage``, ``region``, ``endpoint_url``,
credentials as ``env:`` references (``secret:`` cannot be used here: this store resolves them).

A refresh that fails (throttled, network down, access briefly revoked) serves the last good
bundle and logs a warning naming the secret, never a value; only a store that never fetched a
bundle raises. Values appear in no log line, repr or error message.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any

from agent_env.api import ConfigError, SecretStore, StoreError, bundle_value, get_logger
from agentenv_aws_stores.aws import (
    AwsClient,
    AwsClientUser,
    AwsSettings,
    AwsStoreError,
    ResourceMissing,
    error_code,
    raise_for,
)


class SecretsManagerSecretStore(AwsClientUser, SecretStore):
    """:class:`SecretStore` over one Secrets Manager secret holding a JSON/YAML bundle."""

    def __init__(
        self,
        *,
        secret_id: str | None = None,
        ttl: float = 300.0,
        retry_after: float = 30.0,
        version_stage: str | None = None,
        region: str | None = None,
        endpoint_url: str | None = None,
        profile: str | None = None,
        access_key_id: str | None = None,
        secret_access_key: str | None = None,
        session_token: str | None = None,
        max_attempts: int = 6,
    ) -> None:
        if not isinstance(secret_id, str) or not secret_id:
            raise ConfigError('[stores.secret] the secretsmanager store needs secret_id = "<name>"')
        if ttl < 0 or retry_after < 0:
            raise ConfigError("[stores.secret] ttl and retry_after must be >= 0 seconds")
        self.secret_id = secret_id
        self.ttl = float(ttl)
        self.retry_after = float(retry_after)
        self.version_stage = version_stage
        self.aws = AwsSettings(region=region, endpoint_url=endpoint_url, profile=profile,
                               access_key_id=access_key_id, secret_access_key=secret_access_key,
                               session_token=session_token, max_attempts=max_attempts)
        self._clients = AwsClient(self.aws, "secretsmanager")
        self._lock = threading.Lock()  # the cached bundle's
        self._bundle: dict[str, Any] | None = None
        self._next_refresh = 0.0
        #: a monotonic clock, replaceable in tests of the TTL
        self.clock = time.monotonic

    def __repr__(self) -> str:
        return f"SecretsManagerSecretStore(secret_id={self.secret_id!r}, ttl={self.ttl})"

    def get(self, name: str) -> str | None:
        if not isinstance(name, str) or not name:
            return None
        return bundle_value(self._current(), name)

    def refresh(self) -> None:
        """Drop the cached bundle so the next ``get`` fetches the secret again."""
        with self._lock:
            self._next_refresh = 0.0

    def _current(self) -> dict[str, Any]:
        with self._lock:
            now = self.clock()
            if self._bundle is not None and now < self._next_refresh:
                return self._bundle
            try:
                bundle = self._fetch()
            except Exception as exc:
                if self._bundle is None:
                    raise
                # The error text is AWS's (codes, ARNs); secret values never reach it.
                get_logger("stores").warning(
                    "secret refresh failed; serving the last good bundle",
                    secret_id=self.secret_id,
                    error=f"{type(exc).__name__}: {exc}",
                    retry_in_s=self.retry_after,
                )
                self._next_refresh = now + self.retry_after
                return self._bundle
            self._bundle = bundle
            self._next_refresh = now + self.ttl
            return bundle

    def _fetch(self) -> dict[str, Any]:
        from botocore.exceptions import BotoCoreError, ClientError

        options: dict[str, Any] = {"SecretId": self.secret_id}
        if self.version_stage:
            options["VersionStage"] = self.version_stage
        try:
            answer = self.client.get_secret_value(**options)
        except ClientError as exc:
            if error_code(exc) == "ResourceNotFoundException":
                raise ResourceMissing(
                    f"Secrets Manager secret '{self.secret_id}' does not exist "
                    f"({self.aws.region or 'the configured region'}): create it with "
                    f"`aws secretsmanager create-secret --name {self.secret_id} "
                    "--secret-string file://secrets.json` (a JSON or YAML mapping of name: value)"
                ) from None
            raise_for(exc, "secretsmanager:GetSecretValue", f"secret {self.secret_id}")
        except BotoCoreError as exc:
            raise_for(exc, "secretsmanager:GetSecretValue", f"secret {self.secret_id}")
        text = answer.get("SecretString")
        if text is None:
            try:
                text = bytes(answer["SecretBinary"]).decode("utf-8")
            except (KeyError, UnicodeDecodeError):
                raise AwsStoreError(
                    f"secret '{self.secret_id}' holds binary data, not a JSON/YAML bundle"
                ) from None
        return parse_bundle(text, self.secret_id)


def parse_bundle(text: str, where: str) -> dict[str, Any]:
    """The mapping in a JSON or YAML text; errors name ``where`` but never quote the text."""
    try:
        data = json.loads(text)
    except ValueError:
        import yaml

        try:
            data = yaml.safe_load(text) if text.strip() else {}
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            line = f" (line {mark.line + 1})" if mark is not None else ""
            raise StoreError(f"secret '{where}' is neither JSON nor YAML{line}") from None
    if not isinstance(data, dict):
        raise StoreError(
            f"secret '{where}' must hold a mapping of name: value, not {type(data).__name__}"
        )
    return data
