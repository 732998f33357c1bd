"""AgentEnv's agents plugin: the per-run model gateway and the scripted model.

``agentenv_agents.model_gateway`` serves one model endpoint per run (OpenAI Chat Completions,
OpenAI Responses, Anthropic Messages, streaming included) in front of an upstream, so an agent
gets the gateway URL and a per-run token, never the provider's key. ``agentenv_agents.scripted``
is the scripted model (``scripted``): answers read from a script file, for tests and offline
demos, served through the same gateway.
"""
