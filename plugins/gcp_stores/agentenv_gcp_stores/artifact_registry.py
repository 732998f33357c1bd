"""The ``artifact_registry`` image store: Docker images in an Artifact Registry repository.

Artifact Registry speaks the OCI distribution API at ``<location>-docker.pkg.dev``, and accepts
``docker login`` with the user name ``oauth2accesstoken`` and an OAuth access token as password
(that is what ``gcloud auth configure-docker`` sets up). Images are
``<location>-docker.pkg.dev/<project>/<repository>/<image>:<tag>``: an AgentEnv repo such as
``envs/echo`` is an image path inside one Artifact Registry repository.

The token comes from, in order: a ``token_source`` callable (SDK users), a fixed ``access_token``
setting (e.g. ``env:GCP_ACCESS_TOKEN``), a ``credentials_file``, or google-auth's default chain;
google-auth tokens are refreshed when they near expiry.

An Artifact Registry repository must exist before the first push (unlike images inside it), so
:meth:`ensure_repository` checks it once through the Artifact Registry API and creates it when
``create_repository = true``, else says how to create it. ``registry`` and ``api_endpoint`` can
point elsewhere (a local registry and API stand-in in tests; ``check_repository = false`` skips
the API when there is none).
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from typing import Any

from agent_env.api import ImageStore, RegistryAuth, UserError
from agentenv_gcp_stores.faults import (
    AccessDenied,
    Backoff,
    MissingResource,
    load_credentials,
    message_of,
    retrying,
)

USERNAME = "oauth2accesstoken"
API = "https://artifactregistry.googleapis.com"
_IMAGE = re.compile(r"^[a-z0-9]+(?:[._-][a-z0-9]+)*(?:/[a-z0-9]+(?:[._-][a-z0-9]+)*)*$")
_TAG = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$")
_NAME = re.compile(r"^[a-z]([a-z0-9-]*[a-z0-9])?$")


class _HttpStatus(Exception):
    """A non-2xx answer from the Artifact Registry API (5xx/429 are retried by name)."""

    def __init__(self, status: int, body: str) -> None:
        super().__init__(f"HTTP {status}: {body[:300]}")
        self.status = status
        self.message = body[:300]


class ServiceUnavailable(_HttpStatus):
    """5xx or 429 from the API: :func:`~agentenv_gcp_stores.faults.is_transient` retries it."""


class ArtifactRegistryImageStore(ImageStore):
    """:class:`ImageStore` on an Artifact Registry Docker repository (see the module docstring).

    Settings (``[stores.image]`` with ``backend = "artifact_registry"``): ``project``
    (required), ``location`` (e.g. ``europe-west1``, default ``us``), ``repository`` (default
    ``agentenv``), ``registry`` (default ``<location>-docker.pkg.dev``), ``credentials_file``,
    ``access_token``, ``create_repository``, ``check_repository``, ``api_endpoint``, ``retries``.
    """

    def __init__(
        self,
        *,
        project: str,
        location: str = "us",
        repository: str = "agentenv",
        registry: str | None = None,
        credentials_file: str | None = None,
        access_token: str | None = None,
        create_repository: bool = False,
        check_repository: bool = True,
        api_endpoint: str = API,
        retries: int = 5,
        token_source: Callable[[], str] | None = None,
    ) -> None:
        for setting, value in (("project", project), ("location", location)):
            if not isinstance(value, str) or not value or "/" in value:
                raise UserError(f"[stores.image] {setting} must be set (not {value!r})")
        if not isinstance(repository, str) or not _NAME.match(repository):
            raise UserError(
                f"[stores.image] repository must be an Artifact Registry repository id "
                f"(lowercase letters, digits and '-'), not {repository!r}"
            )
        self.project = project
        self.location = location
        self.repository = repository
        self.registry = (registry or f"{location}-docker.pkg.dev").rstrip("/")
        self.credentials_file = credentials_file
        self.create_repository = create_repository
        self.check_repository = check_repository
        self.api_endpoint = api_endpoint.rstrip("/")
        self.backoff = Backoff(attempts=max(1, int(retries)))
        self._access_token = access_token
        self._token_source = token_source
        self._credentials: Any = None
        self._checked = False
        self._lock = threading.RLock()  # ensure_repository holds it while fetching a token

    def __repr__(self) -> str:
        return f"ArtifactRegistryImageStore({self.prefix!r})"

    @property
    def prefix(self) -> str:
        return f"{self.registry}/{self.project}/{self.repository}/"

    @property
    def resource(self) -> str:
        return f"projects/{self.project}/locations/{self.location}/repositories/{self.repository}"

    # -- the contract -----------------------------------------------------------------------

    def image_ref(self, repo: str, tag: str) -> str:
        if not isinstance(repo, str) or not _IMAGE.match(repo):
            raise UserError(
                f"invalid image name {repo!r}: use lowercase letters, digits, '.', '_', '-' "
                "and '/' between path parts"
            )
        if not isinstance(tag, str) or not _TAG.match(tag):
            raise UserError(f"invalid image tag {tag!r}: up to 128 of letters, digits, '.-_'")
        return f"{self.prefix}{repo}:{tag}"

    def owns(self, ref: str) -> bool:
        return isinstance(ref, str) and ref.startswith(self.prefix)

    def auth(self, ref: str) -> RegistryAuth | None:
        if not self.owns(ref):
            return None
        return RegistryAuth(self.registry, USERNAME, self.access_token())

    def ensure_repository(self, repo: str) -> None:
        """Make sure the Artifact Registry repository exists (images in it need nothing)."""
        if not self.check_repository or self._checked:
            return
        with self._lock:
            if self._checked:
                return
            status = self._api("GET", f"/v1/{self.resource}", action="read")
            if status == 404:
                if not self.create_repository:
                    raise MissingResource(
                        f"the Artifact Registry repository {self.resource} does not exist: create "
                        f"it with `gcloud artifacts repositories create {self.repository} "
                        f"--repository-format=docker --location={self.location} "
                        f"--project={self.project}` (or set create_repository = true)"
                    )
                self._create()
            self._checked = True

    # -- tokens -----------------------------------------------------------------------------

    def access_token(self) -> str:
        """An OAuth access token for the registry (and the Artifact Registry API)."""
        if self._token_source is not None:
            return self._token_source()
        if self._access_token:
            return self._access_token
        with self._lock:
            if self._credentials is None:
                self._credentials, _ = load_credentials(credentials_file=self.credentials_file)
            credentials = self._credentials
            if not credentials.valid:
                from google.auth.transport.requests import Request

                try:
                    retrying(
                        lambda: credentials.refresh(Request()),
                        what="Google credentials: get an access token",
                        backoff=self.backoff,
                    )
                except Exception as exc:
                    if "RefreshError" in {c.__name__ for c in type(exc).__mro__}:
                        raise AccessDenied(
                            f"the credentials were refused: cannot get an access token for "
                            f"{self.registry}: {message_of(exc)}",
                            resource=self.registry,
                            action="authenticate",
                        ) from None
                    raise
            return str(credentials.token)

    # -- the Artifact Registry API -----------------------------------------------------------

    def _api(self, method: str, path: str, *, action: str, body: Any = None) -> int:
        """Call the API; returns 200, 404 or 409 (already exists), raises on the rest."""
        import requests

        def call() -> int:
            response = requests.request(
                method,
                self.api_endpoint + path,
                json=body,
                headers={"Authorization": f"Bearer {self.access_token()}"},
                timeout=30,
            )
            if response.status_code == 429 or response.status_code >= 500:
                raise ServiceUnavailable(response.status_code, response.text)
            return (
                response.status_code
                if response.status_code in (200, 404, 409)
                else (_raise(response.status_code, response.text))
            )

        try:
            return retrying(
                call, what=f"Artifact Registry: {action} {self.resource}", backoff=self.backoff
            )
        except _HttpStatus as exc:
            if exc.status in (401, 403):
                permission = "artifactregistry.repositories." + (
                    "create" if action == "create" else "get"
                )
                raise AccessDenied(
                    f"permission denied: cannot {action} {self.resource} (needs {permission}): "
                    f"{exc.message}",
                    resource=self.resource,
                    action=action,
                ) from None
            raise

    def _create(self) -> None:
        parent = f"projects/{self.project}/locations/{self.location}"
        path = f"/v1/{parent}/repositories?repositoryId={self.repository}"
        self._api("POST", path, action="create", body={"format": "DOCKER"})
        deadline = time.monotonic() + 60
        while self._api("GET", f"/v1/{self.resource}", action="read") == 404:
            if time.monotonic() > deadline:
                raise UserError(f"{self.resource} was requested but did not appear within 60 s")
            time.sleep(0.5)


def _raise(status: int, text: str) -> int:
    raise _HttpStatus(status, text)
