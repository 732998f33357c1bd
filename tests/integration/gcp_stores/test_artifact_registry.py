"""The ``artifact_registry`` image store against a real registry that takes ``oauth2accesstoken``.

``gcp_fakes.registry`` runs Debian's ``docker-registry`` with htpasswd auth whose only password
is the access token the test token endpoint issues for the test service account: a login, push
and pull succeed only with what the store's ``auth()`` returns. The token comes through
google-auth's default chain (``GOOGLE_APPLICATION_CREDENTIALS`` naming the generated key file),
as it would on a workstation or in CI. ``ensure_repository`` runs against a stand-in for the
two Artifact Registry API calls it makes.
"""

from __future__ import annotations

import base64
import io
import json
import tarfile
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from gcp_fakes.oauth import Authority, token_endpoint
from gcp_fakes.registry import artifact_registry_api, registry, registry_binary
from gcp_fakes.testbed import PROJECT, in_ci

from agent_env.errors import UserError
from agent_env.stores.base import ImageStore
from agentenv_gcp_stores.artifact_registry import ArtifactRegistryImageStore
from agentenv_gcp_stores.faults import AccessDenied, MissingResource

TOKEN = "ya29.registry-" + uuid.uuid4().hex


@pytest.fixture(scope="module")
def registry_authority() -> Authority:
    return Authority(PROJECT, fixed_token=TOKEN)


@pytest.fixture(scope="module")
def registry_key(
    registry_authority: Authority, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Path]:
    path = tmp_path_factory.mktemp("ar") / "key.json"
    with token_endpoint(registry_authority, path):
        yield path


@pytest.fixture
def default_credentials(registry_key: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """google-auth's default chain finds the test key (as GOOGLE_APPLICATION_CREDENTIALS)."""
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(registry_key))
    return registry_key


@pytest.fixture(scope="module")
def oci_registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if registry_binary() is None:
        message = "no docker-registry binary (run `bash .ci/docker.sh`)"
        if in_ci():
            pytest.fail(f"{message}; registry tests never skip under CI=true")
        pytest.skip(message)
    with registry(tmp_path_factory.mktemp("registry"), TOKEN) as host:
        yield host


@pytest.fixture
def api(registry_authority: Authority) -> Iterator[Any]:
    with artifact_registry_api(registry_authority) as server:
        yield server


def _store(host: str, api_url: str, **settings: Any) -> ArtifactRegistryImageStore:
    options: dict[str, Any] = {
        "project": PROJECT,
        "location": "europe-west1",
        "repository": "envs",
        "registry": host,
        "api_endpoint": api_url,
    }
    options.update(settings)
    return ArtifactRegistryImageStore(**options)


def _get_v2(host: str, auth: tuple[str, str] | None) -> int:
    request = urllib.request.Request(f"http://{host}/v2/")
    if auth:
        basic = base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
        request.add_header("Authorization", f"Basic {basic}")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


def test_refs_follow_artifact_registry_and_ownership_is_by_prefix() -> None:
    store = ArtifactRegistryImageStore(project="p1", location="europe-west1", repository="envs")
    assert isinstance(store, ImageStore)
    ref = store.image_ref("agentenv/echo", "sha-1")
    assert ref == "europe-west1-docker.pkg.dev/p1/envs/agentenv/echo:sha-1"
    assert store.owns(ref) and not store.owns("europe-west1-docker.pkg.dev/p2/envs/x:y")
    assert store.auth("docker.io/library/python:3.11") is None
    for bad in (("Echo", "t"), ("echo", "bad tag"), ("echo//x", "t")):
        with pytest.raises(UserError):
            store.image_ref(*bad)
    with pytest.raises(UserError, match="repository"):
        ArtifactRegistryImageStore(project="p1", repository="Bad_Name")


def test_auth_from_default_credentials_opens_the_registry(
    default_credentials: Path, oci_registry: str, api: Any
) -> None:
    store = _store(oci_registry, api.url)
    ref = store.image_ref("agentenv/echo", "v1")
    auth = store.auth(ref)
    assert auth is not None and auth.registry == oci_registry
    assert (auth.username, auth.password) == ("oauth2accesstoken", TOKEN)
    assert TOKEN not in repr(auth) and TOKEN not in repr(store)
    assert _get_v2(oci_registry, (auth.username, auth.password)) == 200
    assert _get_v2(oci_registry, (auth.username, "ya29.wrong")) == 401
    assert _get_v2(oci_registry, None) == 401


@pytest.mark.docker
def test_push_and_pull_with_the_stores_credentials(
    default_credentials: Path, oci_registry: str, api: Any
) -> None:
    """Docker itself logs in with ``auth()``'s credentials, pushes and pulls back."""
    try:
        import docker

        client = docker.from_env()
        client.ping()
    except Exception as exc:
        if in_ci():
            pytest.fail(f"no Docker daemon ({exc}); Docker tests never skip under CI=true")
        pytest.skip(f"no Docker daemon: {exc}")
    store = _store(oci_registry, api.url, create_repository=True)
    store.ensure_repository("agentenv/hello")
    ref = store.image_ref("agentenv/hello", uuid.uuid4().hex[:8])
    repo, tag = ref.rsplit(":", 1)
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        data = uuid.uuid4().hex.encode()
        info = tarfile.TarInfo("hello.txt")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    client.api.import_image_from_data(buffer.getvalue(), repository=repo, tag=tag)
    try:
        image_id = client.images.get(ref).id
        auth = store.auth(ref)
        assert auth is not None
        credentials = {"username": auth.username, "password": auth.password}
        denied = list(client.api.push(repo, tag=tag, stream=True, decode=True))
        assert any("error" in chunk for chunk in denied), denied  # no credentials: refused
        pushed = list(
            client.api.push(repo, tag=tag, auth_config=credentials, stream=True, decode=True)
        )
        assert not [chunk for chunk in pushed if "error" in chunk], pushed
        client.images.remove(ref)
        assert client.images.pull(repo, tag=tag, auth_config=credentials).id == image_id
    finally:
        try:
            client.images.remove(ref, force=True)
        except Exception:
            pass


def test_token_source_and_fixed_token_settings() -> None:
    calls: list[int] = []

    def source() -> str:
        calls.append(1)
        return f"tok-{len(calls)}"

    store = ArtifactRegistryImageStore(project="p", token_source=source)
    ref = store.image_ref("x", "y")
    assert store.auth(ref).password == "tok-1" and store.auth(ref).password == "tok-2"
    fixed = ArtifactRegistryImageStore(project="p", access_token="ya29.fixed")
    assert fixed.auth(fixed.image_ref("x", "y")).password == "ya29.fixed"


def test_refused_key_is_a_clear_error(
    tmp_path: Path, registry_authority: Authority, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A key the token endpoint does not accept (signed by another key) -> AccessDenied."""
    stranger = Authority(PROJECT)
    with token_endpoint(registry_authority, tmp_path / "good.json") as token_uri:
        forged = stranger.key_info(token_uri) | {"client_email": registry_authority.email}
        (tmp_path / "bad.json").write_text(json.dumps(forged))
        store = ArtifactRegistryImageStore(
            project=PROJECT, credentials_file=str(tmp_path / "bad.json"), retries=1
        )
        with pytest.raises(
            AccessDenied, match="the credentials were refused: cannot get an access"
        ):
            store.auth(store.image_ref("x", "y"))


def test_ensure_repository_checks_once_and_says_how_to_create(
    default_credentials: Path, api: Any
) -> None:
    store = _store("registry.invalid", api.url)
    with pytest.raises(MissingResource) as caught:
        store.ensure_repository("agentenv/echo")
    message = str(caught.value)
    assert f"projects/{PROJECT}/locations/europe-west1/repositories/envs does not exist" in message
    assert "gcloud artifacts repositories create envs --repository-format=docker" in message
    api.repositories.add(f"projects/{PROJECT}/locations/europe-west1/repositories/envs")
    store.ensure_repository("agentenv/echo")
    store.ensure_repository("agentenv/other")
    assert [c for c in api.calls if c[0] == "GET"] and len(api.calls) == 2  # cached after success


def test_ensure_repository_creates_when_configured(default_credentials: Path, api: Any) -> None:
    store = _store("registry.invalid", api.url, repository="made", create_repository=True)
    store.ensure_repository("x")
    assert f"projects/{PROJECT}/locations/europe-west1/repositories/made" in api.repositories
    assert [method for method, _ in api.calls] == ["GET", "POST", "GET"]


def test_ensure_repository_permission_denied(default_credentials: Path, api: Any) -> None:
    api.forbidden_projects.add("locked")
    store = _store("registry.invalid", api.url, project="locked")
    with pytest.raises(AccessDenied) as caught:
        store.ensure_repository("x")
    message = str(caught.value)
    assert message.startswith("permission denied: cannot read projects/locked/locations/")
    assert "artifactregistry.repositories.get" in message
