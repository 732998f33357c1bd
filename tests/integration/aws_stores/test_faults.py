"""Access denied, against a moto server that enforces IAM, and at the botocore boundary.

moto checks IAM policies once ``/moto-api/reset-auth`` sets its free-request budget to 0: the
test sets up a bucket, a table, a secret and a user with no permissions while enforcement is
off, turns it on, and drives each store with that user's keys. This server is the module's
own, so enforcement never leaks into the other tests.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from aws_moto import REGION, MotoServer, start_moto

from agent_env.errors import UserError
from agent_env.stores.base import StoreError
from agentenv_aws_stores.aws import AccessDenied, raise_for
from agentenv_aws_stores.dynamodb import DynamoDocumentStore
from agentenv_aws_stores.ecr import EcrImageStore
from agentenv_aws_stores.s3 import S3ObjectStore
from agentenv_aws_stores.secretsmanager import SecretsManagerSecretStore

BUCKET, TABLE, SECRET = "agentenv-locked", "agentenv-locked", "agentenv/locked"


@pytest.fixture(scope="module")
def locked(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """Settings for a user with no permissions on a moto server that enforces IAM."""
    server: MotoServer = start_moto(tmp_path_factory, "moto-iam")
    try:
        yield _lock_down(server)
    finally:
        server.stop()


def _lock_down(server: MotoServer) -> dict[str, Any]:
    import boto3

    admin = {"endpoint_url": server.url, "region_name": REGION,
             "aws_access_key_id": "AKIAADMINADMINADMIN0", "aws_secret_access_key": "admin"}
    session = boto3.session.Session()
    session.client("s3", **admin).create_bucket(Bucket=BUCKET)
    session.client("secretsmanager", **admin).create_secret(Name=SECRET, SecretString="{}")
    DynamoDocumentStore(
        table=TABLE, create_table=True, endpoint_url=server.url, region=REGION,
        access_key_id="AKIAADMINADMINADMIN0", secret_access_key="admin",
    ).count("warmup")
    iam = session.client("iam", **admin)
    iam.create_user(UserName="nobody")
    key = iam.create_access_key(UserName="nobody")["AccessKey"]
    server.post("/moto-api/reset-auth", b"0")  # from now on every request is checked
    return {
        "endpoint_url": server.url,
        "region": REGION,
        "access_key_id": key["AccessKeyId"],
        "secret_access_key": key["SecretAccessKey"],
    }


def assert_denied(caught: pytest.ExceptionInfo[AccessDenied], action: str, resource: str) -> None:
    message = str(caught.value)
    assert isinstance(caught.value, UserError) and isinstance(caught.value, StoreError)
    assert "\n" not in message and message.startswith("access denied: ")
    assert action in message and resource in message


def test_s3_access_denied_names_the_bucket_and_action(locked: dict[str, Any]) -> None:
    with pytest.raises(AccessDenied) as caught:
        S3ObjectStore(bucket=BUCKET, **locked).put("k", b"x")
    assert_denied(caught, "s3:", f"s3://{BUCKET}")


def test_dynamodb_access_denied_names_the_table_and_action(locked: dict[str, Any]) -> None:
    with pytest.raises(AccessDenied) as caught:
        DynamoDocumentStore(table=TABLE, **locked).insert("c", {"_id": "a"})
    assert_denied(caught, "dynamodb:DescribeTable", f"table {TABLE}")


def test_secrets_access_denied_names_the_secret(locked: dict[str, Any]) -> None:
    with pytest.raises(AccessDenied) as caught:
        SecretsManagerSecretStore(secret_id=SECRET, **locked).get("token")
    assert_denied(caught, "secretsmanager:GetSecretValue", SECRET)


def test_ecr_access_denied_at_the_botocore_boundary() -> None:
    """moto's ECR does not enforce IAM, so its refusal is made at the client's edge: the error
    botocore raises for a real AccessDeniedException answer becomes the same clear error."""
    from botocore.stub import Stubber

    store = EcrImageStore(registry_id="123456789012", region=REGION, endpoint_url="http://127.0.0.1:9")
    with Stubber(store.client) as stub:
        stub.add_client_error(
            "create_repository", service_error_code="AccessDeniedException",
            service_message="User: arn:aws:iam::123456789012:user/ci is not authorized",
            http_status_code=400,
        )
        with pytest.raises(AccessDenied) as caught:
            store.ensure_repository("hello")
    assert_denied(caught, "ecr:CreateRepository", "ECR repository hello")


@pytest.mark.parametrize(
    ("code", "denied"),
    [("AccessDenied", True), ("AccessDeniedException", True), ("403", True),
     ("UnrecognizedClientException", True), ("ValidationException", False)],
)
def test_error_mapping_at_the_botocore_boundary(code: str, denied: bool) -> None:
    from botocore.exceptions import ClientError

    error = ClientError({"Error": {"Code": code, "Message": "m"}}, "PutObject")
    with pytest.raises(StoreError) as caught:
        raise_for(error, "s3:PutObject", "s3://b/k")
    assert isinstance(caught.value, AccessDenied) is denied
    assert "s3:PutObject" in str(caught.value) and "s3://b/k" in str(caught.value)


def test_missing_credentials_are_one_clear_line(monkeypatch: pytest.MonkeyPatch) -> None:
    from botocore.exceptions import NoCredentialsError

    with pytest.raises(UserError, match="no AWS credentials for s3:GetObject on s3://b/k"):
        raise_for(NoCredentialsError(), "s3:GetObject", "s3://b/k")
