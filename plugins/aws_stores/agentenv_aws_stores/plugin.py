"""aws_stores' hooks: the ``s3``, ``dynamodb``, ``secretsmanager`` and ``ecr`` store backends.

Cheap to import and to call on purpose (the CLI imports every plugin at start and asks every
plugin for its stores): each backend is named by its class's import path and imported only when
config selects it; the store modules themselves import boto3 only inside their methods.
"""

from __future__ import annotations

import importlib
from typing import Any

from agent_env.contributions import StoreBackend
from agent_env.hookspecs import hookimpl


class LazyStoreClass:
    """A store class imported on first use, with the class's own signature.

    The core checks ``[stores.<kind>]`` settings against the factory's keyword arguments
    (``inspect.signature``), so the signature is the class's: an unknown setting is named.
    """

    def __init__(self, path: str) -> None:
        self.path = path

    def load(self) -> type:
        module, _, name = self.path.rpartition(".")
        return getattr(importlib.import_module(module), name)

    @property
    def __signature__(self) -> Any:
        import inspect

        return inspect.signature(self.load())

    def __call__(self, **settings: Any) -> Any:
        return self.load()(**settings)

    def __repr__(self) -> str:
        return f"LazyStoreClass({self.path!r})"


@hookimpl
def agent_env_stores() -> list[StoreBackend]:
    return [
        StoreBackend("object", "s3", LazyStoreClass("agentenv_aws_stores.s3.S3ObjectStore")),
        StoreBackend(
            "document", "dynamodb",
            LazyStoreClass("agentenv_aws_stores.dynamodb.DynamoDocumentStore"),
        ),
        StoreBackend(
            "secret", "secretsmanager",
            LazyStoreClass("agentenv_aws_stores.secretsmanager.SecretsManagerSecretStore"),
        ),
        StoreBackend("image", "ecr", LazyStoreClass("agentenv_aws_stores.ecr.EcrImageStore")),
    ]
