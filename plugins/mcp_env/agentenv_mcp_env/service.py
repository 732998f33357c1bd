"""The ``service`` env type: a plain container beside an env's MCP servers.

A database beside an app, a cache, the sidecar of a Harbor compose task: it serves no tools, so
it is never deployed on its own. A ``multi`` env names it in ``service_envs``; the deploy starts
it on the env's private network under its ``name`` (its peers reach it by that name on any
port; nothing is published, and it has no route out), waits until it is ``healthy`` (or, with
no ``healthcheck``, running), and only then starts the env servers and their gateway, as
compose's ``depends_on: condition: service_healthy`` would. The sandbox's teardown removes it
and its volumes. Its ``env.toml``::

    type = "service"
    name = "db"                                   # its host name (default: the folder's name)
    image = "postgres:16"                         # or a Dockerfile in the folder
    command = ["postgres", "-c", "fsync=off"]
    volumes = ["pgdata:/var/lib/postgresql/data"] # named volumes of the env ("name:/path[:ro]")
    ports = [5432]                                # what it listens on, for readers
    [environment]
    POSTGRES_PASSWORD = "agentenv"
    [healthcheck]                                 # compose's keys; durations "2s" or seconds
    test = ["CMD-SHELL", "pg_isready -U postgres"]
    interval = "2s"
    retries = 30
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

import attrs

from agent_env.api import EnvType, Healthcheck, StepError, VolumeMount

KEYS = ("name", "command", "environment", "volumes", "ports", "healthcheck")
HEALTH_KEYS = ("test", "interval", "timeout", "retries", "start_period")
#: Names the env's own containers take (its servers, gateway, env-state store): a service may
#: not use them.
RESERVED = ("env", "gateway", "servicedb")
_NAME = re.compile(r"[a-z0-9][a-z0-9_.-]{0,62}")
_VOLUME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}")
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(us|ms|s|m|h)")
_UNIT = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


@attrs.frozen
class ServiceSettings:
    """A service env's ``env.toml`` keys, checked."""

    name: str
    command: tuple[str, ...] | None = None
    environment: dict[str, str] = attrs.field(factory=dict)
    volumes: tuple[VolumeMount, ...] = ()
    ports: tuple[int, ...] = ()
    healthcheck: Healthcheck | None = None


def seconds(value: object, where: str) -> float:
    """A duration as compose writes one (``"1m30s"``, ``"500ms"``) or a number of seconds."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0:
        return float(value)
    if isinstance(value, str) and value and _DURATION.sub("", value) == "":
        return sum(float(n) * _UNIT[u] for n, u in _DURATION.findall(value))
    raise ValueError(f"{where} must be a duration (\"10s\", \"1m30s\", or seconds), not "
                     f"{value!r}")


def volume_mount(text: object, where: str) -> VolumeMount:
    """``"name:/path"`` or ``"name:/path:ro"``: a named volume (never a host path)."""
    parts = text.split(":") if isinstance(text, str) else []
    if len(parts) not in (2, 3) or not parts[1].startswith("/") or (
            len(parts) == 3 and parts[2] not in ("ro", "rw")):
        raise ValueError(f"{where}: {text!r} is not \"name:/path\" (or \"name:/path:ro\")")
    if not _VOLUME.fullmatch(parts[0]):
        raise ValueError(f"{where}: {parts[0]!r} is not a volume name (a host path cannot be "
                         "mounted: an env's sandbox may be on another machine; copy the files "
                         "into the image)")
    return VolumeMount(parts[0], parts[1], read_only=len(parts) == 3 and parts[2] == "ro")


def healthcheck(table: object, where: str) -> Healthcheck:
    """Compose's ``healthcheck`` keys (``test`` as a list or a shell line)."""
    if not isinstance(table, dict):
        raise ValueError(f"{where} must be a table with test (and interval, timeout, retries, "
                         "start_period)")
    unknown = sorted(set(table) - set(HEALTH_KEYS))
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {', '.join(unknown)} (it takes: "
                         f"{', '.join(HEALTH_KEYS)})")
    test = table.get("test")
    if isinstance(test, str) and test.strip():
        test = ["CMD-SHELL", test]
    if not (isinstance(test, list) and len(test) >= 2 and test[0] in ("CMD", "CMD-SHELL")
            and all(isinstance(t, str) for t in test)):
        raise ValueError(f"{where}.test must be [\"CMD\", argv...], [\"CMD-SHELL\", \"a shell "
                         f"line\"] or a shell line, not {test!r}"[:300])
    retries = table.get("retries", 3)
    if isinstance(retries, bool) or not isinstance(retries, int) or not 0 < retries <= 1000:
        raise ValueError(f"{where}.retries must be a whole number from 1 to 1000")
    return Healthcheck(tuple(test),
                       interval=seconds(table.get("interval", 5.0), f"{where}.interval"),
                       timeout=seconds(table.get("timeout", 5.0), f"{where}.timeout"),
                       retries=retries,
                       start_period=seconds(table.get("start_period", 0.0),
                                            f"{where}.start_period"))


def service_settings(folder_name: str, settings: dict[str, Any], where: str) -> ServiceSettings:
    """The checked settings; ValueError naming the first wrong key."""
    unknown = sorted(set(settings) - set(KEYS))
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {', '.join(unknown)} (a service env takes: "
                         f"{', '.join(KEYS)}, id, image, type)")
    name = settings.get("name", folder_name.lower())
    if not isinstance(name, str) or not _NAME.fullmatch(name) or name in RESERVED \
            or name.startswith("env-"):
        raise ValueError(f"{where}: name {name!r} is not a host name a service can take "
                         "(lowercase letters, digits, '-', '_', '.'; not env, gateway, servicedb "
                         "or env-*)")
    command = settings.get("command")
    if isinstance(command, str):
        import shlex

        command = shlex.split(command)
    if command is not None and not (isinstance(command, list) and command
                                    and all(isinstance(c, str) for c in command)):
        raise ValueError(f"{where}: command must be a list of strings (or one shell-split "
                         "line)")
    environment = settings.get("environment", {})
    if not isinstance(environment, dict) or not all(
            isinstance(k, str) and isinstance(v, (str, int, float, bool))
            for k, v in environment.items()):
        raise ValueError(f"{where}: environment must be a table of NAME = value")
    volumes = settings.get("volumes", [])
    if not isinstance(volumes, list):
        raise ValueError(f"{where}: volumes must be a list of \"name:/path\"")
    ports = settings.get("ports", [])
    if not isinstance(ports, list) or not all(
            isinstance(p, int) and not isinstance(p, bool) and 0 < p < 65536 for p in ports):
        raise ValueError(f"{where}: ports must be a list of port numbers")
    check = settings.get("healthcheck")
    return ServiceSettings(
        name=name, command=tuple(command) if command else None,
        environment={k: _env_text(v) for k, v in environment.items()},
        volumes=tuple(volume_mount(v, f"{where}: volumes") for v in volumes),
        ports=tuple(ports),
        healthcheck=healthcheck(check, f"{where}: healthcheck") if check is not None else None)


def _env_text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


class ServiceEnv(EnvType):
    """A container a ``multi`` env runs beside its env servers (see the module)."""

    name: ClassVar[str] = "service"

    @classmethod
    def bundle_problems(cls, env: Any, bundle: Any) -> list[str]:
        try:
            service_settings(env.name, env.settings, f"{env.label}/env.toml")
        except ValueError as exc:
            return [str(exc)]
        return []

    @property
    def settings(self) -> ServiceSettings:
        try:
            return service_settings(self.source.name, self.source.settings,
                                    f"service env '{self.source.id}'")
        except ValueError as exc:
            raise StepError(str(exc)) from None

    async def deploy(self, ctx: Any, sandbox: Any, **options: Any) -> Any:
        raise StepError(f"'{self.source.id}' is a service env: it serves no tools, so it is "
                        "not deployed on its own; name it in a multi env's service_envs")
