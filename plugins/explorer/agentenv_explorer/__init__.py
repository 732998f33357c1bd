"""The explorer: ``agent-env up`` serves a page and an HTTP API over the run records."""
