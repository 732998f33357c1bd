"""The plugin as the framework sees it: cheap to import, registered, chosen by name in config.

The config test selects all four backends by name from a TOML file (``[stores.<kind>]`` with
``backend = "..."`` and the settings), and resolves the image store's token through a
``secret:`` reference, which the framework reads from the ``secretmanager`` store: the whole
path from config to the fakes, through ``open_store``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from gcp_fakes.testbed import BUCKET, PROJECT, FirestoreServer

from agent_env.config import load_config
from agent_env.errors import ConfigError
from agent_env.plugins import PluginHost
from agent_env.runtime import Runtime
from agent_env.stores import build_store
from agentenv_gcp_stores.artifact_registry import ArtifactRegistryImageStore
from agentenv_gcp_stores.firestore import FirestoreDocumentStore
from agentenv_gcp_stores.gcs import GcsObjectStore
from agentenv_gcp_stores.secretmanager import SecretManagerSecretStore


def test_importing_the_plugin_and_calling_its_hook_imports_no_google_library() -> None:
    code = (
        "import sys, agentenv_gcp_stores.plugin as p\n"
        "backends = p.agent_env_stores()\n"
        "print(sorted(f'{b.kind}:{b.name}' for b in backends))\n"
        "print([m for m in sys.modules if m.startswith(('google', 'grpc'))])\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert out[0] == str(
        ["document:firestore", "image:artifact_registry", "object:gcs", "secret:secretmanager"]
    )
    assert out[1] == "[]"


def test_agent_env_plugin_list_shows_it_active() -> None:
    executable = Path(sys.executable).parent / "agent-env"
    listed = subprocess.run(
        [str(executable), "plugin", "list", "--json"], capture_output=True, text=True, check=True
    )
    plugins = json.loads(listed.stdout)
    entries = plugins if isinstance(plugins, list) else plugins.get("plugins", [])
    mine = [p for p in entries if "gcp-stores" in json.dumps(p)]
    assert mine and "active" in json.dumps(mine[0])


def test_config_selects_every_backend_by_name(
    tmp_path: Path,
    gcs: tuple[str, Any],
    key_file: Path,
    secret_manager_fake: tuple[str, Any],
    firestore_server: FirestoreServer,
) -> None:
    secret_id = f"bundle-{uuid.uuid4().hex[:6]}"
    secret_manager_fake[1].add(
        f"projects/{PROJECT}/secrets/{secret_id}", json.dumps({"registry_token": "ya29.from-sm"})
    )
    config_file = tmp_path / "config.toml"
    config_file.write_text(
        f"""
[stores.object]
backend = "gcs"
bucket = "{BUCKET}"
prefix = "configured"
project = "{PROJECT}"
endpoint = "{gcs[0]}"
credentials_file = "env:AGENTENV_TEST_KEY"

[stores.document]
backend = "firestore"
project = "{PROJECT}"
prefix = "cfg_"

[stores.secret]
backend = "secretmanager"
secret = "projects/{PROJECT}/secrets/{secret_id}"
endpoint = "{secret_manager_fake[0]}"
credentials_file = "env:AGENTENV_TEST_KEY"
ttl = 60

[stores.image]
backend = "artifact_registry"
project = "{PROJECT}"
location = "europe-west1"
access_token = "secret:registry_token"
"""
    )
    host = PluginHost(only={"agentenv-framework-gcp-stores"})
    config = load_config(config_file, environ={"AGENTENV_TEST_KEY": str(key_file)})
    runtime = Runtime(host=host)
    try:
        objects = runtime.store("object", config)
        documents = runtime.store("document", config)
        secrets = runtime.store("secret", config)
        images = runtime.store("image", config)
        assert isinstance(objects, GcsObjectStore) and objects.prefix == "configured/"
        assert isinstance(documents, FirestoreDocumentStore) and documents.prefix == "cfg_"
        assert isinstance(secrets, SecretManagerSecretStore)
        assert isinstance(images, ArtifactRegistryImageStore)
        key = f"k/{uuid.uuid4().hex}"
        objects.put(key, b"through config")
        assert objects.get(key) == b"through config"
        documents.insert("runs", {"_id": key, "ok": True})
        assert documents.find_one("runs", {"_id": key}) == {"_id": key, "ok": True}
        assert secrets.get("registry_token") == "ya29.from-sm"
        ref = images.image_ref("envs/echo", "v1")
        assert ref == f"europe-west1-docker.pkg.dev/{PROJECT}/agentenv/envs/echo:v1"
        assert images.auth(ref).password == "ya29.from-sm"
    finally:
        runtime.close()


def test_unknown_settings_are_named() -> None:
    host = PluginHost(only={"agentenv-framework-gcp-stores"})
    with pytest.raises(ConfigError, match=r"unknown setting\(s\) buckett .*known: .*bucket"):
        build_store("object", "gcs", {"buckett": "x"}, runtime=Runtime(host=host))
