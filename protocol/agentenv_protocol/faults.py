"""set-errors/v1: make a tool fail, or answer slowly, on purpose (for robustness evals).

An env opts in by deriving from :class:`InjectsFaults` as well as ``AgentEnvEnvironment``::

    @environment_card(name="mail")
    class MailEnv(InjectsFaults, AgentEnvEnvironment): ...

Its card then advertises ``urn:agentenv:set-errors/v1`` with two operations, which a task's
``apply_server_config`` step invokes through the gateway (the agent never sees them):

* ``set_errors`` (``POST /agentenv/ext/set-errors/set_errors``) with ``tool_name``,
  ``error_rate`` (0..1: the share of calls that fail), ``error_type`` (the error code the
  failing calls answer with, default ``injected_error``) and ``delay_seconds`` (every call of
  the tool waits this long first, failing or not; at most 300);
* ``clear_errors`` (``POST /agentenv/ext/set-errors/clear_errors``) with ``tool_name`` (or
  none: every tool).

A tool name the env does not serve is refused (HTTP 404, ``not_found``), as is a rate outside
0..1. A failing call is an ordinary tool error (``isError``, ``structuredContent.code`` =
``error_type``, retryable), so the agent sees what a flaky service would give it. Faults apply
to calls through this SDK's own server, not to an env mounted on another framework's app.
"""

from __future__ import annotations

import random
from typing import Any

from agentenv_protocol.env import extension
from agentenv_protocol.errors import AgentEnvError
from agentenv_protocol.fault_rules import DEFAULT_ERROR_TYPE, Fault

URI = "urn:agentenv:set-errors/v1"
MAX_DELAY_SECONDS = 300.0


class InjectsFaults:
    """Mixin giving an env set-errors/v1 (see the module)."""

    @property
    def agentenv_faults(self) -> dict[str, Fault]:
        """Tool name -> its fault; the server consults it on every call."""
        return self.__dict__.setdefault("_agentenv_faults", {})

    def agentenv_fault_roll(self) -> float:
        """A number in [0, 1) deciding whether a faulty call fails (overridable for tests)."""
        roller = self.__dict__.setdefault("_agentenv_fault_random", random.Random())
        return float(roller.random())

    def _known_tool(self, tool_name: str) -> None:
        registry = self.agentenv_registry()  # type: ignore[attr-defined]
        if tool_name not in registry.tools:
            known = ", ".join(sorted(registry.tools)) or "none"
            raise AgentEnvError("not_found", f"no tool {tool_name!r} (tools: {known})",
                                status=404)

    @extension(URI, op="set_errors", description="Make a tool fail or answer slowly.")
    def set_errors(self, tool_name: str, error_rate: float = 1.0,
                   error_type: str = DEFAULT_ERROR_TYPE, delay_seconds: float = 0.0
                   ) -> dict[str, Any]:
        self._known_tool(tool_name)
        if not 0 <= error_rate <= 1:
            raise AgentEnvError("invalid_params", f"error_rate must be 0..1, not {error_rate}")
        if not 0 <= delay_seconds <= MAX_DELAY_SECONDS:
            raise AgentEnvError("invalid_params", "delay_seconds must be "
                                f"0..{MAX_DELAY_SECONDS:g}, not {delay_seconds}")
        if not error_type.strip():
            raise AgentEnvError("invalid_params", "error_type must be a code (a word)")
        self.agentenv_faults[tool_name] = Fault(float(error_rate), error_type,
                                                float(delay_seconds))
        return {"ok": True, "tool_name": tool_name, "error_rate": error_rate,
                "error_type": error_type, "delay_seconds": delay_seconds}

    @extension(URI, op="clear_errors", description="Make tools behave again.")
    def clear_errors(self, tool_name: str | None = None) -> dict[str, Any]:
        if tool_name is None:
            cleared = sorted(self.agentenv_faults)
            self.agentenv_faults.clear()
        else:
            self._known_tool(tool_name)
            cleared = [tool_name] if self.agentenv_faults.pop(tool_name, None) else []
        return {"ok": True, "cleared": cleared}
