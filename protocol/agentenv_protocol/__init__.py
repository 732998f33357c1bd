"""agentenv protocol v1: the env server SDK, clients and gateway."""
