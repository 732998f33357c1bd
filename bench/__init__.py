"""AgentEnv's benchmarks: ``python -m bench``. Ratios against baselines measured in the same run."""
