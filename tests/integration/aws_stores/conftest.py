"""AWS store tests run against a real ``moto_server`` process this session starts.

moto is a pip package (the plugin's ``test`` extra), so these tests never skip under
``CI=true``: a missing moto is a failure there, a skip with the install command elsewhere.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from aws_moto import CREDENTIALS, REGION, start_moto


@pytest.fixture(scope="session")
def moto_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The endpoint URL of a moto server shared by the session's tests."""
    server = start_moto(tmp_path_factory, "moto")
    try:
        yield server.url
    finally:
        server.stop()


@pytest.fixture(scope="session")
def aws(moto_server: str) -> dict[str, Any]:
    """Settings every store takes to talk to the session's moto server."""
    return {"endpoint_url": moto_server, "region": REGION, **CREDENTIALS}


@pytest.fixture(scope="session")
def boto(aws: dict[str, Any]) -> Callable[[str], Any]:
    """``boto("s3")``: a plain boto3 client on moto, to set up and to check from outside."""
    import boto3

    def client(service: str) -> Any:
        return boto3.session.Session().client(
            service,
            endpoint_url=aws["endpoint_url"],
            region_name=REGION,
            aws_access_key_id=CREDENTIALS["access_key_id"],
            aws_secret_access_key=CREDENTIALS["secret_access_key"],
        )

    return client


@pytest.fixture
def unique_name() -> str:
    return f"agentenv-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def s3_store(aws: dict[str, Any], unique_name: str) -> Any:
    """An S3 object store on a bucket of its own: what signs the grants of the agent tests."""
    from agentenv_aws_stores.s3 import S3ObjectStore

    return S3ObjectStore(bucket=unique_name, create_bucket=True, **aws)


@pytest.fixture(autouse=True)
def _no_ambient_aws(monkeypatch: pytest.MonkeyPatch) -> None:
    """Never reach real AWS: a forgotten endpoint would fail on these dummy credentials."""
    for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", CREDENTIALS["access_key_id"])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", CREDENTIALS["secret_access_key"])
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
