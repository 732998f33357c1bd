"""A Harbor task's ``environment/docker-compose.yaml`` as a ``multi`` env.

Harbor runs the task's ``main`` service (built from ``environment/Dockerfile``: the container
the agent works in and ``tests/test.sh`` runs in) with the other services beside it on one
network. Imported, ``main`` is the Harbor shell env as for a one-container task, and every other
service becomes a ``service`` env (``envs/<task>-<service>/``) that keeps its name (the host
name ``main`` reaches it by), its ports, environment, command, named volumes and healthcheck; a
``multi`` env (``envs/<task>/``) deploys them together behind one gateway, the services first,
``main`` once each is healthy (compose's ``depends_on: condition: service_healthy``).

What cannot be honoured is refused at import, naming the service and the key: host networking,
``privileged``, devices and added capabilities (an env is a sandbox), a build context outside
``environment/``, host-path volumes (the sandbox may be on another machine), ``env_file``,
``extends``, ``secrets``/``configs``, and ``main`` without ``environment/Dockerfile`` or with
volumes of its own. Keys that change nothing here (``restart``, ``container_name``,
``networks``: every service shares the env's one network; ``depends_on``; ``main``'s
``command``: its container runs the shell server, as Harbor runs ``sleep infinity``) are listed
in a note line.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import attrs

from agent_env.api import UserError, is_inside

COMPOSE_FILES = ("docker-compose.yaml", "docker-compose.yml")
MAIN = "main"
#: Keys that would break the sandbox or cannot be carried to another machine.
REFUSED = {
    "network_mode": "an env's services share its one private network",
    "privileged": "an env is a sandbox",
    "devices": "an env is a sandbox",
    "cap_add": "an env is a sandbox",
    "pid": "an env is a sandbox",
    "ipc": "an env is a sandbox",
    "userns_mode": "an env is a sandbox",
    "security_opt": "an env is a sandbox",
    "volumes_from": "share a named volume instead",
    "extends": "write the service out in full",
    "env_file": "write the variables under environment",
    "entrypoint": "set ENTRYPOINT in the service's Dockerfile",
    "secrets": "pass them under environment",
    "configs": "copy them into the image",
}
#: Keys that change nothing here; named in a note.
IGNORED = ("restart", "container_name", "networks", "depends_on", "labels", "hostname",
           "stop_grace_period", "stop_signal", "logging", "init", "tty", "stdin_open",
           "deploy", "mem_limit", "cpus", "expose")
MAPPED = ("build", "image", "environment", "command", "volumes", "ports", "healthcheck")
TOP_LEVEL = ("services", "volumes", "networks", "version", "name")
HEALTH_KEYS = ("test", "interval", "timeout", "retries", "start_period")
_SERVICE = re.compile(r"[a-z0-9][a-z0-9_.-]{0,62}")


@attrs.frozen
class Sidecar:
    """One service beside ``main``, as its ``service`` env's ``env.toml`` keys."""

    name: str
    #: The build context, a folder inside ``environment/`` (None: ``image``).
    context: Path | None
    dockerfile: str
    settings: dict[str, Any]


@attrs.frozen
class ComposePlan:
    """What the import writes for a compose task."""

    #: ``main``'s environment, as ENV lines for its Dockerfile.
    main_environment: dict[str, str]
    sidecars: tuple[Sidecar, ...]
    notes: tuple[str, ...] = ()


def compose_file(environment: Path) -> Path | None:
    for name in COMPOSE_FILES:
        if (environment / name).is_file():
            return environment / name
    return None


def plan(path: Path, text: str) -> ComposePlan:
    """The plan for the compose file ``path`` (``text`` its contents); UserError naming every
    service and key that cannot be honoured."""
    import yaml

    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise UserError(f"{path}: not valid YAML ({str(exc).splitlines()[0]})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("services"), dict) \
            or MAIN not in doc["services"]:
        raise UserError(f"{path}: a Harbor compose file has services, one of them '{MAIN}' "
                        "(the container the agent works in)")
    problems: list[str] = []
    notes: list[str] = []
    for key in sorted(set(doc) - set(TOP_LEVEL), key=str):  # YAML keys need not be strings
        if not str(key).startswith("x-"):
            problems.append(f"{path}: top-level key '{key}' is not supported")
    declared = doc.get("volumes") or {}
    if not isinstance(declared, dict):
        problems.append(f"{path}: volumes must be a mapping of volume names")
        declared = {}
    for name, volume in declared.items():
        if isinstance(volume, dict) and (volume.get("external") or volume.get("driver")):
            problems.append(f"{path}: volume '{name}': external volumes and drivers are not "
                            "supported (an env's volumes are its own)")
    environment = path.parent
    sidecars: list[Sidecar] = []
    main_env: dict[str, str] = {}
    for name, service in doc["services"].items():
        where = f"{path}: service '{name}'"
        if not isinstance(service, dict):
            problems.append(f"{where} must be a mapping")
            continue
        problems += [f"{where}: {key} is not supported ({why})"
                     for key, why in REFUSED.items() if key in service]
        ignored = sorted(k for k in service if k in IGNORED)
        unknown = sorted((k for k in service if k not in (*MAPPED, *IGNORED, *REFUSED)),
                         key=str)
        problems += [f"{where}: key '{key}' is not supported" for key in unknown]
        try:
            env_vars = _environment(service.get("environment"), where)
        except ValueError as exc:
            problems.append(str(exc))
            env_vars = {}
        if name == MAIN:
            main_env = env_vars
            problems += _main_problems(service, where, environment)
            ignored += [k for k in ("command", "healthcheck", "ports") if k in service]
            if ignored:
                notes.append(f"service '{MAIN}': {', '.join(sorted(ignored))} not applied (its "
                             "container runs the shell server; the services start first)")
            continue
        if not isinstance(name, str) or not _SERVICE.fullmatch(name) or name.startswith("env-") \
                or name in ("env", "gateway", "servicedb"):
            problems.append(f"{where}: the name cannot be a service's host name here "
                            "(lowercase letters, digits, '-', '_', '.'; not env, gateway, "
                            "servicedb, env-*)")
            continue
        try:
            sidecars.append(_sidecar(name, service, where, environment, env_vars, declared))
        except ValueError as exc:
            problems.append(str(exc))
            continue
        if ignored:
            notes.append(f"service '{name}': {', '.join(ignored)} not applied")
    if problems:
        raise UserError("; ".join(problems))
    if "${" in text:
        notes.append("the compose file has ${...} variables: they are kept as written (set "
                     "the values in the file)")
    return ComposePlan(main_env, tuple(sidecars), tuple(notes))


def _main_problems(service: dict[str, Any], where: str, environment: Path) -> list[str]:
    problems = []
    build = service.get("build")
    context, dockerfile = _build(build) if build is not None else (None, "Dockerfile")
    if build is None or context is None or (environment / context).resolve() != \
            environment.resolve() or dockerfile != "Dockerfile":
        problems.append(f"{where}: must build from environment/Dockerfile (build: .)")
    if service.get("volumes"):
        problems.append(f"{where}: volumes are not supported on {MAIN} (its files are the "
                        "image's; give a sidecar the volume)")
    return problems


def _build(build: object) -> tuple[str | None, str]:
    if isinstance(build, str):
        return build, "Dockerfile"
    if isinstance(build, dict) and set(build) <= {"context", "dockerfile"}:
        return str(build.get("context", ".")), str(build.get("dockerfile", "Dockerfile"))
    return None, "Dockerfile"


def _environment(value: object, where: str) -> dict[str, str]:
    """Compose's ``environment``: a list of ``KEY=VALUE`` or a mapping."""
    if value is None:
        return {}
    if isinstance(value, list):
        pairs = {}
        for item in value:
            if not isinstance(item, str) or "=" not in item:
                raise ValueError(f"{where}: environment entry {item!r} has no value (KEY=VALUE;"
                                 " a variable taken from the host is not supported)"[:300])
            key, _, val = item.partition("=")
            pairs[key] = val
        return pairs
    if isinstance(value, dict):
        if any(v is None for v in value.values()):
            raise ValueError(f"{where}: an environment variable without a value is taken from "
                             "the host, which an env cannot do (give it a value)")
        return {str(k): _text(v) for k, v in value.items()}
    raise ValueError(f"{where}: environment must be a list or a mapping")


def _text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _sidecar(name: str, service: dict[str, Any], where: str, environment: Path,
             env_vars: dict[str, str], declared: dict[str, Any]) -> Sidecar:
    settings: dict[str, Any] = {"name": name}
    build, image = service.get("build"), service.get("image")
    context: Path | None = None
    dockerfile = "Dockerfile"
    if build is not None:
        folder, dockerfile = _build(build)
        if folder is None:
            raise ValueError(f"{where}: build takes context and dockerfile only")
        context = (environment / folder)
        if not is_inside(context, environment) or not context.is_dir():
            raise ValueError(f"{where}: build context {folder!r} is not a folder inside "
                             "environment/")
        if "/" in dockerfile or not (context / dockerfile).is_file():
            raise ValueError(f"{where}: no {dockerfile} in its build context {folder!r}")
    elif isinstance(image, str) and image:
        settings["image"] = image
    else:
        raise ValueError(f"{where}: needs build or image")
    if env_vars:
        settings["environment"] = env_vars
    command = service.get("command")
    if command is not None:
        if isinstance(command, str):
            command = shlex.split(command)
        if not isinstance(command, list) or not all(isinstance(c, (str, int)) for c in command):
            raise ValueError(f"{where}: command must be a string or a list")
        settings["command"] = [str(c) for c in command]
    volumes = [_volume(v, where, declared) for v in service.get("volumes") or []]
    if volumes:
        settings["volumes"] = volumes
    ports = [_port(p, where) for p in service.get("ports") or []]
    if ports:
        settings["ports"] = ports
    check = service.get("healthcheck")
    if check is not None and not isinstance(check, dict):
        raise ValueError(f"{where}: healthcheck must be a mapping")
    if check and not check.get("disable"):
        unknown = sorted(set(check) - {*HEALTH_KEYS, "disable"})
        if unknown:
            raise ValueError(f"{where}: healthcheck: unknown key(s) {', '.join(unknown)} "
                             f"(it takes: {', '.join(HEALTH_KEYS)})")
        if check.get("test") in (None, ["NONE"]):
            raise ValueError(f"{where}: healthcheck has no test")
        settings["healthcheck"] = {k: v for k, v in check.items() if k in HEALTH_KEYS}
    return Sidecar(name, context, dockerfile, settings)


def _volume(value: object, where: str, declared: dict[str, Any]) -> str:
    if isinstance(value, dict):
        if value.get("type", "volume") != "volume" or not value.get("source"):
            raise ValueError(f"{where}: only named volumes are supported (a host path cannot "
                             "be mounted: the env may run on another machine)")
        value = f"{value['source']}:{value.get('target')}" + (
            ":ro" if value.get("read_only") else "")
    if not isinstance(value, str) or value.count(":") not in (1, 2):
        raise ValueError(f"{where}: volume {value!r} is not \"name:/path\"")
    source = value.split(":")[0]
    if source.startswith((".", "/", "~")):
        raise ValueError(f"{where}: volume {value!r} mounts a host path, which an env cannot "
                         "do (copy the files into the service's image)")
    if source not in declared:
        raise ValueError(f"{where}: volume '{source}' is not declared under the top-level "
                         "volumes")
    return value


def _port(value: object, where: str) -> int:
    """The container's side of ``"8080:80"``, ``"80/tcp"``, ``80`` or a long-syntax port."""
    if isinstance(value, dict):
        value = value.get("target")
    text = str(value).split("/")[0].rsplit(":", 1)[-1]
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise ValueError(f"{where}: port {value!r} is not a port")
    return int(text)
