"""Google Cloud stores for AgentEnv: Cloud Storage, Firestore, Secret Manager, Artifact Registry.

Selected by name in config (``[stores] object = "gcs"``, settings in ``[stores.object]``); the
extra ``gcp`` installs this plugin with the Google client libraries. Nothing here imports a
Google library at import time: the CLI loads the plugin at every start, so the libraries are
imported inside the methods that talk to Google.

Modules: :mod:`.gcs` (object store), :mod:`.firestore` (document store), :mod:`.secretmanager`
(secret store), :mod:`.artifact_registry` (image store), :mod:`.faults` (errors a user can act
on, retries, credentials), :mod:`.plugin` (the hook implementation).
"""

__version__ = "0.1.0"
