"""gcp_stores' hooks: the ``gcs``, ``firestore``, ``secretmanager``, ``artifact_registry`` stores.

Cheap to import on purpose (the CLI imports it at every start): the store modules are imported
only when the hook is called, and they import the Google libraries only inside their methods.
The store classes are the factories, so the core checks ``[stores.<kind>]`` settings against
their keyword arguments and names any unknown one.
"""

from __future__ import annotations

from agent_env.api import StoreBackend, hookimpl


@hookimpl
def agent_env_stores() -> list[StoreBackend]:
    from agentenv_gcp_stores.artifact_registry import ArtifactRegistryImageStore
    from agentenv_gcp_stores.firestore import FirestoreDocumentStore
    from agentenv_gcp_stores.gcs import GcsObjectStore
    from agentenv_gcp_stores.secretmanager import SecretManagerSecretStore

    return [
        StoreBackend("object", "gcs", GcsObjectStore),
        StoreBackend("document", "firestore", FirestoreDocumentStore),
        StoreBackend("secret", "secretmanager", SecretManagerSecretStore),
        StoreBackend("image", "artifact_registry", ArtifactRegistryImageStore),
    ]
