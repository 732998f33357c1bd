"""Google Cloud stores for AgentEnv (placeholder while building)."""

__version__ = "0.1.0"
