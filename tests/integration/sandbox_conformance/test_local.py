"""The ``local`` provider (work folders, subprocesses) against the provider conformance suite."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_env.sandbox.base import SandboxProvider
from agent_env.sandbox.local import LocalSandboxProvider
from agent_env.testing.provider_conformance import ProviderConformance


class TestLocalProvider(ProviderConformance):
    PROVIDER_CLASS = LocalSandboxProvider
    EXPOSES_UNLISTED_PORTS = True  # processes share the host's ports
    RUNS_CONTAINERS = False  # a folder runs no images

    @pytest.fixture
    def provider(self, tmp_path: Path) -> SandboxProvider:
        return LocalSandboxProvider(root=tmp_path / "sandboxes")

    def reopen(self, provider: SandboxProvider) -> SandboxProvider:
        assert isinstance(provider, LocalSandboxProvider)
        return LocalSandboxProvider(root=provider.root)
