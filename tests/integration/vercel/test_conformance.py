"""The vercel provider, on the real SDK, against the provider conformance suite.

The SDK talks HTTP to the fake Vercel Sandbox API (:mod:`fake_vercel`), whose sandboxes are
real containers, so commands, copies and ports really happen.
"""

from __future__ import annotations

import pytest
from fake_vercel import BASE_IMAGE, FakeVercel, fake_settings

from agent_env.sandbox.base import Sandbox, SandboxProvider
from agent_env.testing.provider_conformance import ProviderConformance
from agentenv_vercel.provider import VercelSandboxProvider

pytestmark = pytest.mark.docker


class TestVercelProvider(ProviderConformance):
    PROVIDER_CLASS = VercelSandboxProvider
    IMAGE = BASE_IMAGE  # ignored: every sandbox boots the configured image
    EXPOSES_UNLISTED_PORTS = False  # Vercel makes public only the ports a sandbox is made with
    LISTS_SANDBOXES = True  # by tag
    NETWORK_POLICIES = ("no-internet",)

    @pytest.fixture
    def provider(self, fake_vercel: FakeVercel) -> SandboxProvider:
        self.fake = fake_vercel
        return VercelSandboxProvider.from_config(**fake_settings(fake_vercel))

    def reopen(self, provider: SandboxProvider) -> SandboxProvider:
        return VercelSandboxProvider.from_config(**fake_settings(self.fake))

    async def lose_transport(self, sandbox: Sandbox) -> None:
        self.fake.unreachable.add(sandbox.id)
