"""The modal and modal_vm providers, on the real SDK, against the provider conformance suite.

The SDK talks gRPC to the fake Modal (:mod:`fake_modal`): its control plane and the task
command router every ``exec`` goes through. Sandboxes are real containers, so commands,
copies and tunnels really happen.
"""

from __future__ import annotations

import pytest
from fake_modal import BASE_IMAGE, FakeModal

from agent_env.sandbox.base import SandboxProvider
from agent_env.testing.provider_conformance import ProviderConformance
from agentenv_modal.provider import ModalSandboxProvider, ModalVmSandboxProvider

pytestmark = pytest.mark.docker


class TestModalProvider(ProviderConformance):
    PROVIDER_CLASS = ModalSandboxProvider
    IMAGE = BASE_IMAGE  # container sandboxes boot it; VM sandboxes boot vm_image
    LISTS_SANDBOXES = True  # Modal lists sandboxes by tag
    NETWORK_POLICIES = ("no-internet",)

    @pytest.fixture
    def provider(self, fake_modal: FakeModal) -> SandboxProvider:
        return ModalSandboxProvider.from_config(vm_image=BASE_IMAGE)

    def reopen(self, provider: SandboxProvider) -> SandboxProvider:
        return ModalSandboxProvider.from_config(vm_image=BASE_IMAGE)


class TestModalVmProvider(TestModalProvider):
    PROVIDER_CLASS = ModalVmSandboxProvider

    @pytest.fixture
    def provider(self, fake_modal: FakeModal) -> SandboxProvider:
        return ModalVmSandboxProvider.from_config(vm_image=BASE_IMAGE)

    def reopen(self, provider: SandboxProvider) -> SandboxProvider:
        return ModalVmSandboxProvider.from_config(vm_image=BASE_IMAGE)
