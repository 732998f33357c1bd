"""The daytona provider, on the real SDK, against the provider conformance suite.

The SDK talks HTTP to the fake Daytona API (:mod:`fake_daytona`), whose sandboxes are real
containers, so commands, copies and ports really happen.
"""

from __future__ import annotations

import pytest
from fake_daytona import API_KEY, BASE_IMAGE, FakeDaytona

from agent_env.sandbox.base import Sandbox, SandboxProvider
from agent_env.testing.provider_conformance import ProviderConformance
from agentenv_daytona.provider import DaytonaSandboxProvider

pytestmark = pytest.mark.docker


class TestDaytonaProvider(ProviderConformance):
    PROVIDER_CLASS = DaytonaSandboxProvider
    IMAGE = BASE_IMAGE  # container mode boots it; vm mode boots the Docker host image
    EXPOSES_UNLISTED_PORTS = True  # every port has a preview URL
    LISTS_SANDBOXES = True  # Daytona filters sandboxes by label
    NETWORK_POLICIES = ("no-internet",)

    @pytest.fixture
    def provider(self, fake_daytona: FakeDaytona) -> SandboxProvider:
        self.fake = fake_daytona
        return DaytonaSandboxProvider.from_config(api_key=API_KEY,
                                                  api_url=f"{fake_daytona.url}/api")

    def reopen(self, provider: SandboxProvider) -> SandboxProvider:
        return DaytonaSandboxProvider.from_config(api_key=API_KEY, api_url=f"{self.fake.url}/api")

    async def lose_transport(self, sandbox: Sandbox) -> None:
        self.fake.unreachable.add(sandbox.id)
