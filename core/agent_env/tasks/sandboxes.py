"""Finding sandbox providers by name, and going down a fallback chain.

A chain (``--sandbox daytona,docker``) is read twice: before the run, the first provider that
is installed and usable is opened, so a missing key is one error line (:func:`choose_provider`);
then each sandbox is created on the first provider of the chain that manages to
(:func:`create_in_chain`): a cloud out of quota, rate-limited past its retries, down, or unable
to enforce the spec, hands the sandbox on to the next one. A config error is never passed over:
it names a fix the user has to make.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agent_env.errors import ConfigError, UserError
from agent_env.sandbox.base import (
    Sandbox,
    SandboxError,
    SandboxProvider,
    SandboxSpec,
    SandboxUnsupported,
)


def open_provider(name: str) -> SandboxProvider:
    """The current runtime's provider ``name``, built once from its config table."""
    from agent_env.runtime import current

    return current().provider(name)


def choose_provider(chain: list[str]) -> str:
    """The first provider of ``chain`` that is installed and usable on this host."""
    from agent_env.plugins.reporting import missing
    from agent_env.runtime import current

    host = current().host
    reasons = []
    for name in chain:
        provider_class: Any = host.registry("sandbox_provider").get(name)
        if provider_class is None:
            reasons.append(missing(host, "sandbox_provider", name).message)
            continue
        reason = provider_class.availability()
        if reason is None:
            return name
        reasons.append(f"{name}: {reason}")
    raise UserError(
        f"no sandbox provider of {','.join(chain)} is usable here", notes=reasons
    )


async def create_in_chain(chain: list[str], spec: SandboxSpec, *,
                          note: Callable[[str], None] | None = None
                          ) -> tuple[Sandbox, list[str]]:
    """Create ``spec`` on the first provider of ``chain`` that can; return the sandbox and one
    line per provider passed over, saying why. The last failure is raised. A provider not
    installed or not usable here is skipped, as :func:`choose_provider` skips it; one is asked
    whether it is usable only when the chain reaches it."""
    from agent_env.runtime import current

    registry = current().host.registry("sandbox_provider")
    passed: list[str] = []
    failed: SandboxError | SandboxUnsupported | None = None
    for name in chain:
        provider_class: Any = registry.get(name)
        if provider_class is None or provider_class.availability() is not None:
            continue
        if failed is not None and note is not None:
            note(f"sandbox {spec.name}: {passed[-1]}; trying {name}")
        try:
            return await open_provider(name).create(spec), passed
        except ConfigError:
            raise  # a setting to fix: never passed over
        except (SandboxError, SandboxUnsupported) as exc:
            failed = exc
            passed.append(f"{name}: {exc}")
    if failed is None:
        choose_provider(chain)  # none usable: raises, naming why each one is not
        raise AssertionError("unreachable")
    raise failed
