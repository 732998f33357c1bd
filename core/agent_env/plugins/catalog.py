"""The first-party plugins: what each provides, its distribution, extra and folder.

The kernel never imports a plugin; it only knows these names so that an error can say what to
install (``the 's3' object store comes from the aws_stores plugin: ...``) and so that
``agent-env plugin add tensorlake`` can find the plugin's folder in a checkout.
"""

from __future__ import annotations

import attrs


@attrs.frozen
class FirstPartyPlugin:
    short_name: str
    distribution: str
    extra: str | None
    provides: dict[str, tuple[str, ...]]

    def install_hint(self) -> str:
        if self.extra:
            return f"pip install 'agentenv-framework[{self.extra}]'"
        return f"pip install {self.distribution}"


FIRST_PARTY: tuple[FirstPartyPlugin, ...] = (
    FirstPartyPlugin(
        "docker_env",
        "agentenv-framework-docker-env",
        None,
        {"sandbox_provider": ("docker",), "image_store": ("local", "local_registry")},
    ),
    FirstPartyPlugin(
        "mcp_env", "agentenv-framework-mcp-env", None, {"env_type": ("mcp_server",)}
    ),
    FirstPartyPlugin("smol_vm", "agentenv-framework-smol-vm", "smol",
                     {"sandbox_provider": ("smol_vm",)}),
    FirstPartyPlugin("tensorlake", "agentenv-framework-tensorlake", "tensorlake",
                     {"sandbox_provider": ("tensorlake",)}),
    FirstPartyPlugin("tenki", "agentenv-framework-tenki", "tenki",
                     {"sandbox_provider": ("tenki",)}),
    FirstPartyPlugin(
        "aws_stores",
        "agentenv-framework-aws-stores",
        "aws",
        {
            "object_store": ("s3",),
            "secret_store": ("secretsmanager",),
            "document_store": ("dynamodb",),
            "image_store": ("ecr",),
        },
    ),
    FirstPartyPlugin(
        "gcp_stores",
        "agentenv-framework-gcp-stores",
        "gcp",
        {
            "object_store": ("gcs",),
            "secret_store": ("secretmanager",),
            "document_store": ("firestore",),
            "image_store": ("artifact_registry",),
        },
    ),
)


def by_short_name(name: str) -> FirstPartyPlugin | None:
    for plugin in FIRST_PARTY:
        if name in (plugin.short_name, plugin.distribution):
            return plugin
    return None


def provider_of(kind: str, name: str) -> FirstPartyPlugin | None:
    """The first-party plugin that provides ``name`` of ``kind`` (e.g. ``object_store``)."""
    for plugin in FIRST_PARTY:
        if name in plugin.provides.get(kind, ()):
            return plugin
    return None
