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
import os
import re
from typing import TYPE_CHECKING, Any

import attrs

from agent_env.errors import ConfigError, cause
from agent_env.runtime import current

if TYPE_CHECKING:
    from agent_env.tasks.context import TaskContext
    from agent_env.tasks.steps import RunChoices

#: Who ``[model] roles`` can name a model for: the agent under test, the user a conversation
#: simulates, and the rubric judge.
ROLES = ("agent", "user", "judge")
#: ``[model] params`` may not set these: the call itself does.
RESERVED_PARAMS = frozenset({"model", "messages", "api_key", "api_base", "user", "metadata",
                             "timeout", "response_format"})
#: The reference's variable for extra upstream headers (JSON), read when ``[model] headers``
#: is not set.
EXTRA_HEADERS_VARIABLE = "LITELLM_EXTRA_HEADERS"


@attrs.frozen
class ModelSettings:
    """``[model]``, read and checked: the upstream, the default model and one per role, the
    request fields every call of AgentEnv's own adds (``params``), and the headers sent to the
    upstream."""

    base_url: str | None = None
    api_key: str | None = None
    default: str | None = None
    roles: dict[str, str] = attrs.field(factory=dict)
    params: dict[str, Any] = attrs.field(factory=dict)
    headers: dict[str, str] = attrs.field(factory=dict)

    def secret_header_values(self) -> list[str]:
        """The values of headers that carry credentials (``Authorization``, ``X-Api-Key``...),
        which records must never show; a plain header (``X-Team``) is not masked."""
        return [value for name, value in self.headers.items()
                if re.search(r"auth|key|token|secret|cookie|signature", name, re.IGNORECASE)]

    def model_for(self, role: str, *, or_default: bool = True) -> str | None:
        """The model ``[model] roles`` names for ``role``, else (``or_default``) the default
        one. A simulated user is asked with ``or_default=False``: the default model does not
        turn every conversation into a simulated one."""
        return self.roles.get(role) or (self.default if or_default else None)


def model_settings() -> ModelSettings:
    """The runtime's ``[model]`` section, checked; ConfigError naming the key otherwise.

    ``default`` (the reference's name) and ``name`` are the same setting."""
    section = current().config.section("model")
    default = section.get("default", section.get("name"))
    roles = _table(section, "roles")
    unknown = sorted(set(roles) - set(ROLES))
    if unknown:
        raise ConfigError(f"[model] roles: {', '.join(unknown)} is not a role (roles: "
                          f"{', '.join(ROLES)})")
    params = _table(section, "params")
    reserved = sorted(RESERVED_PARAMS & set(params))
    if reserved:
        raise ConfigError(f"[model] params may not set {', '.join(reserved)}: each call sets "
                          "them itself")
    if "headers" in section:
        headers = _table(section, "headers")
    else:
        headers = _extra_headers()
    for where, table in (("roles", roles), ("headers", headers)):
        bad = sorted(k for k, v in table.items() if not isinstance(v, str))
        if bad:
            raise ConfigError(f"[model] {where}: {', '.join(bad)} must be a string")
    return ModelSettings(_text(section.get("base_url")), _text(section.get("api_key")),
                         _text(default), roles, params, headers)


def _table(section: dict[str, Any], key: str) -> dict[str, Any]:
    value = section.get(key, {})
    if not isinstance(value, dict):
        raise ConfigError(f"[model] {key} must be a table, not {type(value).__name__}")
    return dict(value)


def _text(value: Any) -> str | None:
    return str(value) if value else None


def _extra_headers() -> dict[str, Any]:
    raw = os.environ.get(EXTRA_HEADERS_VARIABLE)
    if not raw:
        return {}
    try:
        headers = json.loads(raw)
    except json.JSONDecodeError:
        headers = None
    if not isinstance(headers, dict):
        raise ConfigError(f"${EXTRA_HEADERS_VARIABLE} must be a JSON object of header names "
                          'and values, such as {"x-team": "rl"}')
    return headers


def upstream_key(choices: RunChoices, role: str) -> str | None:
    """The upstream key the run chose for ``role``'s model calls (``--litellm-api-key``; a
    judge's is ``--judge-litellm-api-key``, else the run's), resolved; None to use ``[model]
    api_key``."""
    given = (choices.judge_api_key or choices.model_api_key) if role == "judge" \
        else choices.model_api_key
    if not given:
        return None
    from agent_env.config import resolve_references

    option = "--judge-litellm-api-key" if role == "judge" and choices.judge_api_key \
        else "--litellm-api-key"
    config = current().config
    secrets = config.secrets().get if config.secrets is not None else None
    return str(resolve_references(given, secrets=secrets, where=option))


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
    if model_settings().base_url:
        return None
    served = ", ".join(f"{p}:<name>" for p in providers) or "none installed"
    what = (f"model provider '{prefix}' is not known" if prefix
            else f"model '{model}' goes to the model upstream")
    return (f"{what}, and no upstream is configured: set [model] base_url (and api_key) in "
            f".agentenv/config.toml or AGENT_ENV_MODEL_BASE_URL, or use a model a plugin "
            f"serves ({served})")


async def chat(ctx: TaskContext, model: str, messages: list[dict[str, str]], *,
               timeout: float, who: str, response_format: Any = None,
               extra: dict[str, Any] | None = None, role: str = "agent") -> str:
    """The reply text of one OpenAI Chat Completions call (``temperature`` 0 unless ``[model]
    params`` says otherwise); ``who`` names the asker in errors (``the judge``); ``extra`` adds
    request fields (``reasoning_effort``); ``role`` (:data:`ROLES`) picks the upstream key the
    run chose for it (``--judge-litellm-api-key``) when no gateway is up."""
    import aiohttp

    from agent_env.tasks.steps import InfraError, StepError

    settings = model_settings()
    base_url: Any = settings.base_url
    api_key: Any = upstream_key(ctx.choices, role) or settings.api_key
    headers = dict(settings.headers)  # for the configured upstream only
    if ctx.model_endpoint is not None:  # the gateway adds them on its way upstream
        base_url, api_key = ctx.model_endpoint
        headers = {}
    if not base_url:
        raise StepError(f"{who} needs a model upstream: set [model] base_url, or deploy an "
                        "agent first (its model gateway then answers)")
    ctx.register_secret(api_key)
    body: dict[str, Any] = {"temperature": 0, **settings.params, **(extra or {}),
                            "model": model, "messages": messages}
    if response_format is not None:
        body["response_format"] = response_format
    for value in settings.secret_header_values():
        ctx.register_secret(value)
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    url = str(base_url).rstrip("/") + "/chat/completions"
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout)) as http, \
                http.post(url, json=body, headers=headers) as response:
            text = await response.text()
            if response.status != 200:
                raise InfraError(f"{who} upstream answered {response.status}: {text[:200]}")
            data = json.loads(text)
    except (aiohttp.ClientError, TimeoutError, json.JSONDecodeError) as exc:
        raise InfraError(f"{who} upstream {url} failed: {cause(exc)}") from None
    try:
        return str(data["choices"][0]["message"]["content"] or "")
    except (KeyError, IndexError, TypeError):
        raise InfraError(f"{who} upstream answered no message: {text[:200]}") from None
