"""docker_env's own settings: the ``[plugins.agentenv-framework-docker-env]`` table.

Why a class: the kernel checks a plugin's table against its attrs fields
(``build_settings``), so an unknown key is a one-line error naming the known ones, and the
result lives in the runtime's ``state`` (two runtimes, two settings), never in a module global.
"""

from __future__ import annotations

import attrs

from agent_env.api import build_settings, current

TABLE = "[plugins.agentenv-framework-docker-env]"
STATE_KEY = "docker_env"


def _positive(instance: object, attribute: attrs.Attribute, value: float) -> None:
    if value <= 0:
        raise ValueError(f"{attribute.name} must be a positive number of seconds, not {value!r}")


@attrs.frozen(kw_only=True)
class DockerEnvSettings:
    """What docker_env does beyond the provider's own config.

    ``build_timeout``: seconds an image build may take (from the build's start: base-image
    pulls, context upload, every step) before it is given up with an error naming this
    setting. Default 1800 (30 minutes: a cold build with a full ``pip install`` takes a few);
    there is no "no limit" value, set a large one instead.
    """

    build_timeout: float = attrs.field(default=1800.0, converter=float, validator=_positive)


def configure(settings: dict[str, object]) -> None:
    """Check the table and keep the result in the current runtime's state."""
    current().state[STATE_KEY] = build_settings(
        DockerEnvSettings, settings, where=TABLE, what="the docker_env plugin"
    )


def docker_env_settings() -> DockerEnvSettings:
    """The settings in effect (defaults when the table was never handed over)."""
    found = current().state.get(STATE_KEY)
    return found if isinstance(found, DockerEnvSettings) else DockerEnvSettings()
