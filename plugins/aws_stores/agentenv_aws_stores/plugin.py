"""aws_stores' hooks: the ``s3``, ``dynamodb``, ``secretsmanager`` and ``ecr`` store backends.

Cheap to import on purpose (the CLI imports it at every start): the store modules are imported
only when the hook is called, and they import boto3 only inside their methods. The store classes
are the factories, so the core checks ``[stores.<kind>]`` settings against their keyword
arguments and names any unknown one.
"""

from __future__ import annotations

from agent_env.contributions import StoreBackend
from agent_env.hookspecs import hookimpl


@hookimpl
def agent_env_stores() -> list[StoreBackend]:
    from agentenv_aws_stores.dynamodb import DynamoDocumentStore
    from agentenv_aws_stores.ecr import EcrImageStore
    from agentenv_aws_stores.s3 import S3ObjectStore
    from agentenv_aws_stores.secretsmanager import SecretsManagerSecretStore

    return [
        StoreBackend("object", "s3", S3ObjectStore),
        StoreBackend("document", "dynamodb", DynamoDocumentStore),
        StoreBackend("secret", "secretsmanager", SecretsManagerSecretStore),
        StoreBackend("image", "ecr", EcrImageStore),
    ]
