"""The ECR image store (``[stores] image = "ecr"``): env images pushed to a private registry.

Settings (``[stores.image]``): ``region``, ``registry_id`` (the account whose registry to use;
default: the caller's), ``prefix`` (repositories are ``<prefix>/<repo>``), ``tag_mutability``
(``MUTABLE`` or ``IMMUTABLE`` for repositories this store creates), ``scan_on_push``,
``endpoint_url`` and credentials like the other AWS stores.

ECR needs a repository before the first push, so :meth:`ensure_repository` creates it (an
existing one is fine). Pushing and pulling use ``docker login`` credentials that
``GetAuthorizationToken`` mints for 12 hours: :meth:`auth` returns them, cached until shortly
before they expire.
"""

from __future__ import annotations

import base64
import datetime as dt
from typing import Any

from agent_env.api import ConfigError, ImageStore, RegistryAuth
from agentenv_aws_stores.aws import (
    AwsClient,
    AwsClientUser,
    AwsSettings,
    AwsStoreError,
    error_code,
    raise_for,
)

#: Credentials are renewed this long before ECR says they expire.
RENEW_BEFORE = dt.timedelta(minutes=10)


class EcrImageStore(AwsClientUser, ImageStore):
    """:class:`ImageStore` on an ECR registry (see the module docstring for the settings)."""

    def __init__(
        self,
        *,
        region: str | None = None,
        registry_id: str | None = None,
        prefix: str = "",
        tag_mutability: str = "MUTABLE",
        scan_on_push: bool = False,
        endpoint_url: str | None = None,
        profile: str | None = None,
        access_key_id: str | None = None,
        secret_access_key: str | None = None,
        session_token: str | None = None,
        max_attempts: int = 6,
    ) -> None:
        if tag_mutability not in ("MUTABLE", "IMMUTABLE"):
            raise ConfigError(
                "[stores.image] tag_mutability must be MUTABLE or IMMUTABLE, "
                f"not {tag_mutability!r}"
            )
        if registry_id is not None and not (registry_id.isdigit() and len(registry_id) == 12):
            raise ConfigError(
                f"[stores.image] registry_id must be a 12-digit AWS account id, not {registry_id!r}"
            )
        self.registry_id = registry_id
        self.prefix = prefix.strip("/")
        self.tag_mutability = tag_mutability
        self.scan_on_push = scan_on_push
        self.aws = AwsSettings(region=region, endpoint_url=endpoint_url, profile=profile,
                               access_key_id=access_key_id, secret_access_key=secret_access_key,
                               session_token=session_token, max_attempts=max_attempts)
        self._clients = AwsClient(self.aws, "ecr")
        self._auth: RegistryAuth | None = None
        self._auth_expires = dt.datetime.min.replace(tzinfo=dt.UTC)
        self._host: str | None = None

    def __repr__(self) -> str:
        return f"EcrImageStore(registry_id={self.registry_id!r}, prefix={self.prefix!r})"

    def repository_name(self, repo: str) -> str:
        if not isinstance(repo, str) or not repo.strip("/"):
            raise ValueError(f"an image repository must be a non-empty name, not {repo!r}")
        repo = repo.strip("/")
        return f"{self.prefix}/{repo}" if self.prefix else repo

    @property
    def registry(self) -> str:
        """The registry host, ``<account>.dkr.ecr.<region>.amazonaws.com``."""
        if self._host is None:
            if self.registry_id is not None:
                region = self.client.meta.region_name
                suffix = "amazonaws.com.cn" if region.startswith("cn-") else "amazonaws.com"
                self._host = f"{self.registry_id}.dkr.ecr.{region}.{suffix}"
            else:
                self._host = self._mint().registry
        return self._host

    def image_ref(self, repo: str, tag: str) -> str:
        return f"{self.registry}/{self.repository_name(repo)}:{tag}"

    def ensure_repository(self, repo: str) -> None:
        from botocore.exceptions import BotoCoreError, ClientError

        name = self.repository_name(repo)
        options: dict[str, Any] = {
            "repositoryName": name,
            "imageTagMutability": self.tag_mutability,
            "imageScanningConfiguration": {"scanOnPush": self.scan_on_push},
        }
        if self.registry_id:
            options["registryId"] = self.registry_id
        try:
            self.client.create_repository(**options)
        except ClientError as exc:
            if error_code(exc) != "RepositoryAlreadyExistsException":
                raise_for(exc, "ecr:CreateRepository", f"ECR repository {name}")
        except BotoCoreError as exc:
            raise_for(exc, "ecr:CreateRepository", f"ECR repository {name}")

    def owns(self, ref: str) -> bool:
        head = f"{self.registry}/{self.prefix}/" if self.prefix else f"{self.registry}/"
        return isinstance(ref, str) and ref.startswith(head)

    def auth(self, ref: str) -> RegistryAuth | None:
        """``docker login`` credentials for ``ref`` (``None`` for refs outside this registry)."""
        if not self.owns(ref):
            return None
        return self._mint()

    def _mint(self) -> RegistryAuth:
        """Push/pull credentials from ``GetAuthorizationToken``, reused until near expiry."""
        from botocore.exceptions import BotoCoreError, ClientError

        now = dt.datetime.now(dt.UTC)
        if self._auth is not None and now < self._auth_expires - RENEW_BEFORE:
            return self._auth
        options = {"registryIds": [self.registry_id]} if self.registry_id else {}
        resource = f"the ECR registry of account {self.registry_id or '(caller)'}"
        try:
            answer = self.client.get_authorization_token(**options)
        except (ClientError, BotoCoreError) as exc:
            raise_for(exc, "ecr:GetAuthorizationToken", resource)
        data = (answer.get("authorizationData") or [None])[0]
        if not data:
            raise AwsStoreError(f"ECR returned no authorization data for {resource}")
        username, _, password = base64.b64decode(data["authorizationToken"]).decode().partition(":")
        host = data["proxyEndpoint"].split("://", 1)[-1].rstrip("/")
        self._auth = RegistryAuth(registry=host, username=username, password=password)
        expires = data.get("expiresAt")
        self._auth_expires = (
            expires.astimezone(dt.UTC) if isinstance(expires, dt.datetime) else now + RENEW_BEFORE
        )
        return self._auth
