"""The sail_vm provider, on the real SDK, against the provider conformance suite.

The SDK (its transport compiled in Rust) talks HTTP to the fake Sail (:mod:`fake_sail`), whose
Sailboxes are real containers, so commands, copies and listeners really happen.
"""

from __future__ import annotations

import pytest
from fake_sail import API_KEY, BASE_IMAGE, FakeSail

from agent_env.sandbox.base import SandboxProvider
from agent_env.testing.provider_conformance import ProviderConformance
from agentenv_sail_vm.provider import SailSandboxProvider

pytestmark = pytest.mark.docker


class TestSailProvider(ProviderConformance):
    PROVIDER_CLASS = SailSandboxProvider
    IMAGE = BASE_IMAGE  # ignored: every Sailbox boots Sail's devbox image
    EXPOSES_UNLISTED_PORTS = True  # a listener is made for any port on demand
    LISTS_SANDBOXES = True  # by name, then each Sailbox's labels file
    NETWORK_POLICIES = ("no-internet",)

    @pytest.fixture
    def provider(self, fake_sail: FakeSail) -> SandboxProvider:
        return SailSandboxProvider.from_config(api_key=API_KEY)

    def reopen(self, provider: SandboxProvider) -> SandboxProvider:
        return SailSandboxProvider.from_config(api_key=API_KEY)
