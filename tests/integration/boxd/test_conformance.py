"""The boxd provider, on the real SDK, against the provider conformance suite.

The SDK talks gRPC (and HTTP, for its key exchange) to the fake boxd (:mod:`fake_boxd`), whose
machines are real containers, so commands, copies and ports really happen.
"""

from __future__ import annotations

import pytest
from fake_boxd import BASE_IMAGE, FakeBoxd, fake_settings

from agent_env.sandbox.base import Sandbox, SandboxProvider
from agent_env.testing.provider_conformance import ProviderConformance
from agentenv_boxd.provider import BoxdSandboxProvider

pytestmark = pytest.mark.docker


class TestBoxdProvider(ProviderConformance):
    PROVIDER_CLASS = BoxdSandboxProvider
    IMAGE = BASE_IMAGE  # ignored: every machine boots boxd's image
    EXPOSES_UNLISTED_PORTS = True  # a proxy is made for any port on demand
    LISTS_SANDBOXES = True  # boxd filters machines by label
    NETWORK_POLICIES = ()

    @pytest.fixture
    def provider(self, fake_boxd: FakeBoxd) -> SandboxProvider:
        self.fake = fake_boxd
        return BoxdSandboxProvider.from_config(**fake_settings(fake_boxd))

    def reopen(self, provider: SandboxProvider) -> SandboxProvider:
        return BoxdSandboxProvider.from_config(**fake_settings(self.fake))

    async def lose_transport(self, sandbox: Sandbox) -> None:
        self.fake.unreachable.add(sandbox.id)
