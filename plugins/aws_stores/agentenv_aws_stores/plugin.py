"""aws_stores' hooks: the ``s3``, ``dynamodb``, ``secretsmanager`` and ``ecr`` store backends.

Cheap to import and to call on purpose (the CLI imports every plugin at start and asks every
plugin for its stores): each backend is a :class:`~agent_env.api.Lazy` naming its class, imported
only when config selects it (the core then checks ``[stores.<kind>]`` against the class's keyword
arguments); the store modules themselves import boto3 only inside their methods.
"""

from __future__ import annotations

from agent_env.api import Lazy, StoreBackend, hookimpl

_STORES = (
    ("object", "s3", "agentenv_aws_stores.s3:S3ObjectStore"),
    ("document", "dynamodb", "agentenv_aws_stores.dynamodb:DynamoDocumentStore"),
    ("secret", "secretsmanager", "agentenv_aws_stores.secretsmanager:SecretsManagerSecretStore"),
    ("image", "ecr", "agentenv_aws_stores.ecr:EcrImageStore"),
)


@hookimpl
def agent_env_stores() -> list[StoreBackend]:
    return [StoreBackend(kind, name, Lazy(name, target)) for kind, name, target in _STORES]
