"""The e2b provider, on the real SDK, against the provider conformance suite.

The SDK talks HTTP (and Connect, to envd) to the fake E2B (:mod:`fake_e2b`), whose sandboxes
are real containers, so commands, copies and ports really happen.
"""

from __future__ import annotations

import pytest
from fake_e2b import BASE_IMAGE, FakeE2B, fake_settings

from agent_env.sandbox.base import Sandbox, SandboxProvider
from agent_env.testing.provider_conformance import ProviderConformance
from agentenv_e2b.provider import E2BSandboxProvider

pytestmark = pytest.mark.docker


class TestE2BProvider(ProviderConformance):
    PROVIDER_CLASS = E2BSandboxProvider
    IMAGE = BASE_IMAGE  # ignored: every sandbox boots base_template
    EXPOSES_UNLISTED_PORTS = True  # every port has a public host
    LISTS_SANDBOXES = True  # E2B filters sandboxes by metadata
    NETWORK_POLICIES = ("no-internet",)

    @pytest.fixture
    def provider(self, fake_e2b: FakeE2B) -> SandboxProvider:
        self.fake = fake_e2b
        return E2BSandboxProvider.from_config(**fake_settings(fake_e2b))

    def reopen(self, provider: SandboxProvider) -> SandboxProvider:
        return E2BSandboxProvider.from_config(**fake_settings(self.fake))

    async def lose_transport(self, sandbox: Sandbox) -> None:
        self.fake.unreachable.add(sandbox.id)
