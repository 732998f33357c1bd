"""``[stores.<kind>] impl = "module:Class"`` with ``[stores.<kind>.config]``: the reference
framework's way to pick a store, read here.

Two cases:

* ``impl`` names one of the reference's own store classes (``agent_env.store...``): it is the
  backend here that does the same job, and its ``config`` keys are renamed to that backend's
  settings. A key with no counterpart is a ConfigError naming it, never dropped. The backend
  keeps its data its own way: a store the reference wrote is not read back.
* ``impl`` names any other class: it is imported and must implement this kind's interface
  (:data:`agent_env.stores.base.STORE_INTERFACES`); ``config`` is its keyword arguments.
"""

from __future__ import annotations

from typing import Any

import attrs

from agent_env.errors import ConfigError

#: Where the reference keeps its store classes.
REFERENCE_PACKAGE = "agent_env.store"


@attrs.frozen
class Counterpart:
    """The backend here that stands for one reference store class, and how its keys map."""

    kind: str
    backend: str
    #: reference key -> our setting (None: read only at the value in ``defaults``)
    keys: dict[str, str | None]
    #: reference key -> the value it may have when it has no counterpart here
    defaults: dict[str, Any] = attrs.field(factory=dict)
    #: why there is no counterpart, when there is none
    missing: str | None = None


COUNTERPARTS: dict[str, Counterpart] = {
    "LocalSqliteDocumentStore": Counterpart("document", "sqlite", {"path": "path"}),
    "DynamoDbDocumentStore": Counterpart("document", "dynamodb",
                                         {"table_prefix": "table", "region": "region"}),
    "MongoDocumentStore": Counterpart("document", "", {}, missing=(
        "no MongoDB document store is installed here; use sqlite, dynamodb (aws_stores) or "
        "firestore (gcp_stores)")),
    "FirestoreMongoDocumentStore": Counterpart("document", "", {}, missing=(
        "the reference reaches Firestore through its MongoDB API; here the firestore backend "
        "(gcp_stores) uses Firestore's own: [stores.document] backend = \"firestore\", "
        "project, database")),
    "LocalFilesystemObjectStore": Counterpart(
        "object", "filesystem", {"root": "path", "grants": None},
        defaults={"grants": "auto"}),
    "S3ObjectStore": Counterpart(
        "object", "s3", {"bucket": "bucket", "region": "region", "share_credentials": None,
                         "grant_lifetime_seconds": None},
        defaults={"share_credentials": False, "grant_lifetime_seconds": 43200}),
    "GcsObjectStore": Counterpart(
        "object", "gcs", {"bucket": "bucket", "project": "project",
                          "signing_service_account": None, "grant_lifetime_seconds": None},
        defaults={"signing_service_account": None, "grant_lifetime_seconds": 43200}),
    "LocalSecretStore": Counterpart(
        "secret", "local", {"values": "values", "file_path": "file", "use_env": "use_environment"}),
    "AwsSecretsManagerSecretStore": Counterpart(
        "secret", "secretsmanager", {"secret_name": "secret_id", "region": "region",
                                     "ttl_seconds": "ttl", "min_refresh_interval": None},
        defaults={"min_refresh_interval": 10.0}),
    "GcpSecretManagerSecretStore": Counterpart(
        "secret", "secretmanager", {"secret_name": "secret", "project": "project",
                                    "version": "version", "ttl_seconds": "ttl",
                                    "min_refresh_interval": None},
        defaults={"min_refresh_interval": 10.0}),
    "LocalRegistryImageStore": Counterpart(
        "image", "local", {"repository_prefix": "prefix", "registry_host": None},
        defaults={"registry_host": "localhost:5000"}),
    "EcrImageStore": Counterpart("image", "ecr", {"repository_prefix": "prefix",
                                                  "registry_host": "registry_id"}),
}


def reference_choice(kind: str, table: dict[str, Any]) -> tuple[str, dict[str, Any], str | None]:
    """``(backend, settings, impl)`` for a ``[stores.<kind>]`` table in the reference's shape;
    ``impl`` is set when the class is built as it is (not one of the reference's own)."""
    impl = table.get("impl")
    where = f"[stores.{kind}]"
    if not isinstance(impl, str) or ":" not in impl:
        raise ConfigError(f"{where} impl must be a 'module:Class' string, not {impl!r}")
    config = table.get("config", {})
    if not isinstance(config, dict):
        raise ConfigError(f"{where}.config must be a table, not {type(config).__name__}")
    extra = sorted(set(table) - {"impl", "config"})
    if extra:
        raise ConfigError(f"{where}: with impl, the store's settings go in {where}.config, "
                          f"not beside it ({', '.join(extra)})")
    module, _, name = impl.partition(":")
    if not (module == REFERENCE_PACKAGE or module.startswith(REFERENCE_PACKAGE + ".")):
        return f"impl:{impl}", dict(config), impl
    counterpart = COUNTERPARTS.get(name)
    if counterpart is None:
        raise ConfigError(f"{where} impl = \"{impl}\": the reference's {name} has no "
                          "counterpart here (agent-env plugin list shows the store backends "
                          "installed; name one with backend = \"NAME\")")
    if counterpart.kind != kind:
        raise ConfigError(f"{where} impl = \"{impl}\" is a {counterpart.kind} store, not a "
                          f"{kind} store")
    if counterpart.missing:
        raise ConfigError(f"{where} impl = \"{impl}\": {counterpart.missing}")
    return counterpart.backend, _settings(where, name, counterpart, config), None


def _settings(where: str, name: str, counterpart: Counterpart,
              config: dict[str, Any]) -> dict[str, Any]:
    settings: dict[str, Any] = {}
    for key, value in config.items():
        if key not in counterpart.keys:
            known = ", ".join(sorted(counterpart.keys)) or "none"
            raise ConfigError(f"{where}.config: '{key}' is not a key of the reference's {name} "
                              f"(it takes: {known})")
        ours = counterpart.keys[key]
        if ours is None:
            if value != counterpart.defaults.get(key):
                raise ConfigError(
                    f"{where}.config: {key} = {value!r} has no counterpart in the "
                    f"'{counterpart.backend}' {counterpart.kind} store here; leave it out")
            continue
        settings[ours] = value
    if counterpart.backend == "dynamodb" and "table" in settings:
        # the reference keeps a table per collection (prefix + name); here one table holds all
        settings["table"] = f"{settings['table']}agentenv-documents"
    if counterpart.backend == "ecr" and "registry_id" in settings:
        # 123456789012.dkr.ecr.us-east-1.amazonaws.com: the account and the region
        host = str(settings.pop("registry_id"))
        parts = host.split(".")
        if len(parts) < 4 or parts[1:3] != ["dkr", "ecr"]:
            raise ConfigError(f"{where}.config: registry_host '{host}' is not an ECR registry "
                              "(ACCOUNT.dkr.ecr.REGION.amazonaws.com)")
        settings.update(registry_id=parts[0], region=parts[3])
    return settings
