"""gcp_stores' hooks: the ``gcs``, ``firestore``, ``secretmanager``, ``artifact_registry`` stores.

Cheap to import on purpose (the CLI imports it at every start): each store is a ``Lazy`` naming
its class, imported only when config selects it, and the store modules import the Google
libraries only inside their methods.
The store classes are the factories, so the core checks ``[stores.<kind>]`` settings against
their keyword arguments and names any unknown one.
"""

from __future__ import annotations

from agent_env.api import Lazy, StoreBackend, hookimpl


@hookimpl
def agent_env_stores() -> list[StoreBackend]:
    return [StoreBackend(kind, name, Lazy(name, target)) for kind, name, target in _STORES]


_STORES = (
    ("object", "gcs", "agentenv_gcp_stores.gcs:GcsObjectStore"),
    ("document", "firestore", "agentenv_gcp_stores.firestore:FirestoreDocumentStore"),
    ("secret", "secretmanager", "agentenv_gcp_stores.secretmanager:SecretManagerSecretStore"),
    ("image", "artifact_registry",
     "agentenv_gcp_stores.artifact_registry:ArtifactRegistryImageStore"),
)
