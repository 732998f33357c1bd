"""AgentEnv stores on AWS (see agentenv_aws_stores.plugin)."""
