"""The ray runner plugin: task runs spread over the nodes of a Ray cluster (``impl = "ray"``)."""
