"""The tenki provider, on the real SDK, against the provider conformance suite.

The SDK's transport is the fake Tenki service (:mod:`fake_tenki`), whose sessions are real
containers, so commands, copies and ports really happen.
"""

from __future__ import annotations

import pytest
from fake_tenki import API_KEY, BASE_IMAGE, DOCKER_SNAPSHOT, FakeTenkiRPC

from agent_env.sandbox.base import Sandbox, SandboxProvider
from agent_env.testing.provider_conformance import ProviderConformance
from agentenv_tenki.provider import TenkiSandboxProvider

pytestmark = pytest.mark.docker


class TestTenkiProvider(ProviderConformance):
    PROVIDER_CLASS = TenkiSandboxProvider
    IMAGE = BASE_IMAGE
    EXPOSES_UNLISTED_PORTS = True  # any port gets a preview URL on demand
    NETWORK_POLICIES = ("no-internet",)

    @pytest.fixture
    def provider(self, fake_tenki: FakeTenkiRPC) -> SandboxProvider:
        self.fake = fake_tenki
        return TenkiSandboxProvider(api_key=API_KEY, snapshot_id=DOCKER_SNAPSHOT, rpc=fake_tenki)

    def reopen(self, provider: SandboxProvider) -> SandboxProvider:
        return TenkiSandboxProvider(api_key=API_KEY, snapshot_id=DOCKER_SNAPSHOT, rpc=self.fake)

    async def lose_transport(self, sandbox: Sandbox) -> None:
        self.fake.unreachable.add(sandbox.id)
