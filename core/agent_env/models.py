"""Who answers a model name: a plugin's model provider (``agent_env_model_providers``) for
``<provider>:<rest>``, else the upstream in ``[model] base_url``. Prompts and judges both name
models, so a run refuses, before it starts, a model nobody would answer.

:func:`chat` is how a step asks a model itself (a judge, a simulated user): through the run's
model gateway when one is up (``ctx.model_endpoint``, so the gateway's call log keeps the call
and its tokens beside the agent's, and a ``scripted:`` model answers offline), else the
configured upstream. An endpoint that cannot be reached or fails is infrastructure's
(``InfraError``), never the agent's failure.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from agent_env.runtime import current

if TYPE_CHECKING:
    from agent_env.tasks.context import TaskContext


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


async def chat(ctx: TaskContext, model: str, messages: list[dict[str, str]], *,
               timeout: float, who: str, response_format: Any = None) -> str:
    """The reply text of one OpenAI Chat Completions call (``temperature`` 0); ``who`` names
    the asker in errors (``the judge``)."""
    import aiohttp

    from agent_env.tasks.steps import InfraError, StepError

    settings = current().config.section("model")
    base_url: Any = settings.get("base_url")
    api_key: Any = settings.get("api_key")
    if ctx.model_endpoint is not None:
        base_url, api_key = ctx.model_endpoint
    if not base_url:
        raise StepError(f"{who} needs a model upstream: set [model] base_url, or deploy an "
                        "agent first (its model gateway then answers)")
    ctx.register_secret(api_key)
    body: dict[str, Any] = {"model": model, "temperature": 0, "messages": messages}
    if response_format is not None:
        body["response_format"] = response_format
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    url = str(base_url).rstrip("/") + "/chat/completions"
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout)) as http, \
                http.post(url, json=body, headers=headers) as response:
            text = await response.text()
            if response.status != 200:
                raise InfraError(f"{who} upstream answered {response.status}: {text[:200]}")
            data = json.loads(text)
    except (aiohttp.ClientError, TimeoutError, json.JSONDecodeError) as exc:
        raise InfraError(f"{who} upstream {url} failed: {type(exc).__name__}: {exc}") \
            from None
    try:
        return str(data["choices"][0]["message"]["content"] or "")
    except (KeyError, IndexError, TypeError):
        raise InfraError(f"{who} upstream answered no message: {text[:200]}") from None
