"""The tensorlake provider, on the real SDK, against the provider conformance suite.

The SDK talks HTTP to the fake Tensorlake API (:mod:`.fake_tensorlake`), whose sandboxes are
real containers, so commands, copies and ports really happen.
"""

from __future__ import annotations

import pytest
from fake_tensorlake import API_KEY, BASE_IMAGE, FakeTensorlake

from agent_env.sandbox.base import Sandbox, SandboxProvider
from agent_env.testing.provider_conformance import ProviderConformance
from agentenv_tensorlake.provider import TensorlakeSandboxProvider

pytestmark = pytest.mark.docker


class TestTensorlakeProvider(ProviderConformance):
    PROVIDER_CLASS = TensorlakeSandboxProvider
    IMAGE = BASE_IMAGE  # container mode boots it; vm mode boots the Docker-capable image
    EXPOSES_UNLISTED_PORTS = True  # ports are made public on demand
    LISTS_SANDBOXES = False  # Tensorlake sandboxes carry no labels
    NETWORK_POLICIES = ("no-internet",)

    @pytest.fixture
    def provider(self, fake_tensorlake: FakeTensorlake) -> SandboxProvider:
        self.fake = fake_tensorlake
        return TensorlakeSandboxProvider.from_config(api_key=API_KEY,
                                                     api_url=fake_tensorlake.url)

    def reopen(self, provider: SandboxProvider) -> SandboxProvider:
        return TensorlakeSandboxProvider.from_config(api_key=API_KEY, api_url=self.fake.url)

    async def lose_transport(self, sandbox: Sandbox) -> None:
        self.fake.unreachable.add(sandbox.id)
