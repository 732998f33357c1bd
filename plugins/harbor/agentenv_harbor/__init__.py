"""AgentEnv's Harbor plugin: Harbor task folders as bundles, and bundles back as Harbor tasks."""
