"""Joining the Ray cluster: what the runner and the sandbox provider share.

Kept free of a top-level ``import ray`` so that listing the plugin's contributions (``agent-env
gc`` asks every sandbox provider class whether it lists sandboxes) does not pay for Ray.
"""

from __future__ import annotations

import os

from agent_env.api import current

#: the Ray custom resource a node declares: how many runs (and so envs) it takes at once
SLOT_RESOURCE = "agentenv_env_slots"
NAMESPACE = "agentenv"
#: variables handed to the actors, so they read the same config and stores as the driver
PASSED_PREFIXES = ("AGENT_ENV_", "AWS_", "GOOGLE_", "XDG_STATE_HOME", "DOCKER_HOST")


def join_cluster(address: str | None, env_slots: int, namespace: str) -> bool:
    """Connect this process to the cluster at ``address``, or start a local one offering
    ``env_slots`` slots; True when it started one (and so should shut it down)."""
    import ray

    if address:
        ray.init(address=address, namespace=namespace, log_to_driver=False)
        return False
    ray.init(namespace=namespace, resources={SLOT_RESOURCE: env_slots},
             include_dashboard=False, log_to_driver=False)
    return True


def actor_env() -> dict[str, str]:
    """The variables an actor gets, so it reads the same config and stores as this process."""
    env = {k: v for k, v in os.environ.items() if k.startswith(PASSED_PREFIXES)}
    config_path = current().config.path
    if config_path is not None:
        env.setdefault("AGENT_ENV_CONFIG", str(config_path))
    return env
