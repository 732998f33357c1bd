"""One real two-node Ray cluster per test session (``ray.cluster_utils.Cluster``: two raylets
on this machine), each node offering one ``agentenv_env_slots``, so node affinity and the
per-node cap can be seen on one machine."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

SLOTS_PER_NODE = 1


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[Any]:
    import os

    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    import ray
    from ray.cluster_utils import Cluster

    from agentenv_ray_runner.runner import SLOT_RESOURCE

    cluster = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 1, "resources": {SLOT_RESOURCE: SLOTS_PER_NODE},
        "include_dashboard": False})
    cluster.add_node(num_cpus=1, resources={SLOT_RESOURCE: SLOTS_PER_NODE})
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, log_to_driver=False)
    try:
        yield cluster
    finally:
        ray.shutdown()
        cluster.shutdown()
