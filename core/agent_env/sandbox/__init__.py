"""Sandboxes: where tasks run things. The contract is in :mod:`agent_env.sandbox.base`."""
