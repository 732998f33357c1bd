"""Who answers a model name: a plugin's model provider (``agent_env_model_providers``) for
``<provider>:<rest>``, else the upstream in ``[model] base_url``. Prompts and judges both name
models, so a run refuses, before it starts, a model nobody would answer."""

from __future__ import annotations

from agent_env.runtime import current


def model_problem(model: str) -> str | None:
    """Why nobody would answer ``model``, or None: a ``<provider>:...`` name a plugin serves is
    answered by it; any other name needs the upstream ``[model] base_url``.

    A name like ``llama3:8b`` (an upstream's own colon) is fine once an upstream is configured.
    """
    runtime = current()
    providers = sorted(runtime.host.registry("model_provider"))
    prefix = model.split(":", 1)[0] if ":" in model else None
    if prefix in providers:
        return None
    if runtime.config.section("model").get("base_url"):
        return None
    served = ", ".join(f"{p}:<name>" for p in providers) or "none installed"
    what = (f"model provider '{prefix}' is not known" if prefix
            else f"model '{model}' goes to the model upstream")
    return (f"{what}, and no upstream is configured: set [model] base_url (and api_key) in "
            f".agentenv/config.toml or AGENT_ENV_MODEL_BASE_URL, or use a model a plugin "
            f"serves ({served})")
