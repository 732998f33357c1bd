"""Config picks the AWS backends by name, and their credentials arrive resolved from ``env:`` and
``secret:`` references (never needed in clear in the file)."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest

from agent_env.config import load_config
from agent_env.errors import ConfigError
from agent_env.runtime import current
from agent_env.stores import build_store
from agentenv_aws_stores.dynamodb import DynamoDocumentStore
from agentenv_aws_stores.ecr import EcrImageStore
from agentenv_aws_stores.s3 import S3ObjectStore
from agentenv_aws_stores.secretsmanager import SecretsManagerSecretStore

CONFIG = """\
[stores.secret]
backend = "local"
use_environment = false
values = { aws_key = "AKIAFROMSECRETSTORE0", aws_secret = "from-the-secret-store" }

[stores.object]
backend = "s3"
bucket = "team-bucket"
region = "eu-west-1"
access_key_id = "secret:aws_key"
secret_access_key = "secret:aws_secret"

[stores.document]
backend = "dynamodb"
table = "team-docs"
access_key_id = "env:TEAM_AWS_KEY"
secret_access_key = "env:TEAM_AWS_SECRET"

[stores.image]
backend = "ecr"
region = "eu-west-1"
prefix = "agentenv"
"""


def config_from(tmp_path: Path, text: str, **environ: str) -> Any:
    path = tmp_path / "config.toml"
    path.write_text(textwrap.dedent(text))
    return load_config(path, environ=environ, overrides={})


def build(config: Any, kind: str) -> Any:
    choice = config.store(kind)
    return build_store(kind, choice.backend, choice.settings, config=config, runtime=current())


def test_backends_are_chosen_by_name_with_resolved_credentials(tmp_path: Path) -> None:
    config = config_from(tmp_path, CONFIG, TEAM_AWS_KEY="AKIAFROMENVIRONMENT0",
                         TEAM_AWS_SECRET="from-the-environment")
    objects = build(config, "object")
    assert isinstance(objects, S3ObjectStore) and objects.bucket == "team-bucket"
    assert objects.aws.access_key_id == "AKIAFROMSECRETSTORE0"
    assert objects.aws.secret_access_key == "from-the-secret-store"
    assert "from-the-secret-store" not in repr(objects)
    documents = build(config, "document")
    assert isinstance(documents, DynamoDocumentStore) and documents.table == "team-docs"
    assert documents.aws.access_key_id == "AKIAFROMENVIRONMENT0"
    assert "from-the-environment" not in repr(documents)
    assert isinstance(build(config, "image"), EcrImageStore)


def test_the_secret_store_itself_on_secrets_manager(tmp_path: Path) -> None:
    config = config_from(tmp_path, """\
        [stores.secret]
        backend = "secretsmanager"
        secret_id = "agentenv/team"
        region = "eu-west-1"
        access_key_id = "env:K"
        secret_access_key = "env:S"
        """, K="AKIAK", S="s")
    store = build(config, "secret")
    assert isinstance(store, SecretsManagerSecretStore) and store.secret_id == "agentenv/team"


def test_settings_mistakes_are_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="bucket"):
        build(config_from(tmp_path, '[stores]\nobject = "s3"\n'), "object")
    with pytest.raises(ConfigError, match="unknown setting"):
        build(config_from(tmp_path, '[stores.document]\nbackend = "dynamodb"\ntabel = "x"\n'),
              "document")
    with pytest.raises(ConfigError, match="secret: references"):
        build(config_from(tmp_path, '[stores.secret]\nbackend = "secretsmanager"\n'
                          'secret_id = "x"\naccess_key_id = "secret:k"\n'), "secret")
