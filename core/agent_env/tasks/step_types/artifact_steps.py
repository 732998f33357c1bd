"""``load_artifact``: copy artifacts (or files at URLs) into a sandbox or an agent.

The destination is a folder: an artifact's files keep their relative paths under it. A
single-file artifact whose destination ends with the file's own name lands exactly there.
A destination with ``..`` is refused before the run; the sandbox refuses any other escape.

Files an earlier ``collect_artifacts`` step copied out of a sandbox load too
(``artifact_from_step_id``, or ``collected_artifacts_step_id`` as older task files name it),
keeping their paths relative to the folder they were collected from. ``env_step_id`` says
which ``deploy_env`` step's deployment of ``env_id`` to load into: a filter, so a step that
did not deploy that env is an error, never a substitute. ``artifacts`` entries may be ids or
``{"id", "version"}`` objects. ``container_name`` loads into a container of the sandbox that
a ``run_docker_container`` step started. ``snapshot_after_load: true`` cannot be honoured here
and is a preflight problem.

An ``environment`` or ``environment_universe`` artifact loaded into an env (``env_id``, no
``sandbox_name``) is not copied to a folder: it seeds the env's servers by environment name
(:mod:`agent_env.env_data`), and the output lists them under ``seeded``.

``agent_name`` (without ``sandbox_name``) loads into that agent's own container, through the
agent's ``put_file``. A ``cli`` artifact is installed there as the reference installs one: its
files under ``/opt/cli/<command_name>/``, the entrypoint executable, and ``.env`` beside it
naming the gateway of ``env_id`` (``AGENT_ENV_GATEWAY_URL``); the output lists it under
``installed_clis``.
"""

from __future__ import annotations

import posixpath
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import attrs

from agent_env.env_data import ENVIRONMENT_TYPES
from agent_env.tasks.artifacts import CLI, CLI_ROOT, GATEWAY_ENV_FILE
from agent_env.tasks.steps import PreflightView, Step, StepError, renamed_keys

if TYPE_CHECKING:
    from agent_env.tasks.artifacts import ArtifactContent
    from agent_env.tasks.context import TaskContext

#: How a load writes one file: a sandbox's ``put_file``, or an agent's.
Write = Callable[..., Awaitable[None]]

DEFAULT_DESTINATION = "/app"


def has_parent_reference(path: str) -> bool:
    return ".." in path.replace("\\", "/").split("/")


@attrs.define(kw_only=True)
class LoadArtifact(Step):
    type = "load_artifact"
    entity_fields = {"artifact_id": "artifacts", "artifacts": "artifacts",
                     "artifact_versions": "artifacts", "env_id": "envs"}
    version_fields = {"artifact_version": "artifact_id"}

    artifact_id: str | None = None
    artifact_version: int | None = None
    artifacts: list[str] | None = None
    urls: list[str] | None = None
    destination_path: str = DEFAULT_DESTINATION
    sandbox_name: str | None = None
    env_id: str | None = None
    agent_name: str | None = None
    #: The deploy_env step whose deployment of ``env_id`` this loads into.
    env_step_id: str | None = None
    #: Ours: versions of ``artifacts`` entries, id -> version (unlisted: the latest).
    artifact_versions: dict[str, int] | None = None
    #: A collect_artifacts step whose files this loads.
    artifact_from_step_id: str | None = None
    container_name: str | None = None
    snapshot_after_load: bool | None = None

    @classmethod
    def adapt(cls, raw: dict[str, Any]) -> dict[str, Any]:
        """``artifacts: [{"id": "x", "version": 2}]`` (how exported task files list what to
        load) as ids, their versions in ``artifact_versions``;
        ``collected_artifacts_step_id`` as ``artifact_from_step_id``."""
        raw = renamed_keys(raw, {"collected_artifacts_step_id": "artifact_from_step_id"})
        listed = raw.get("artifacts")
        if not isinstance(listed, list) or not any(isinstance(e, dict) for e in listed):
            return raw
        ids: list[Any] = []
        versions = dict(raw.get("artifact_versions") or {})
        for entry in listed:
            if isinstance(entry, dict) and set(entry) <= {"id", "version"} and \
                    isinstance(entry.get("id"), str):
                ids.append(entry["id"])
                if entry.get("version") is not None:
                    versions[entry["id"]] = entry["version"]
            else:
                ids.append(entry)  # not an id: preflight says so
        raw["artifacts"] = ids
        if versions:
            raw["artifact_versions"] = versions
        return raw

    def sources(self) -> list[str]:
        return [*([self.artifact_id] if self.artifact_id else []), *(self.artifacts or []),
                *(self.urls or [])]

    def check(self, view: PreflightView) -> list[str]:
        problems = super().check(view)
        for named, version in (self.artifact_versions or {}).items():
            if named not in (self.artifacts or []):
                problems.append(f"artifact_versions names '{named}', which artifacts does not "
                                "list")
            elif isinstance(version, bool) or not isinstance(version, int) or version < 1:
                problems.append(f"artifact_versions: '{named}' must be a version number (1 or "
                                f"more), not {version!r}")
        if not self.sources() and not self.artifact_from_step_id:
            problems.append("names nothing to load (give artifact_id, artifacts, urls or "
                            "artifact_from_step_id)")
        if self.artifact_from_step_id and self.sources():
            problems.append("artifact_from_step_id loads what that step collected: give it "
                            "alone, without artifact_id, artifacts or urls")
        if self.artifact_from_step_id and self.artifact_from_step_id not in (
                self.depends_on or []):
            problems.append(f"artifact_from_step_id '{self.artifact_from_step_id}' must be in "
                            "depends_on (its files exist once it has run)")
        if self.env_step_id and not self.env_id:
            problems.append("env_step_id picks a deployment of env_id: give env_id too")
        if self.container_name is not None and self.agent_name and not self.sandbox_name:
            problems.append("container_name is a container of a sandbox: give sandbox_name "
                            "with it, not agent_name")
        if self.snapshot_after_load:
            problems.append("snapshot_after_load: snapshotting an env after a load is not "
                            "supported here; leave it out")
        if has_parent_reference(self.destination_path):
            problems.append(
                f"destination_path '{self.destination_path}' leaves its folder through '..'"
            )
        return problems

    def _check_env_step(self, ctx: TaskContext) -> None:
        """``env_step_id`` must be the step that deployed the ``env_id`` loaded into."""
        if not self.env_step_id or not self.env_id:
            return
        deployed = getattr(ctx.env(self.env_id), "instance_id", None)
        output = ctx.outputs.get(self.env_step_id)
        if not isinstance(output, dict) or output.get("instance_id") != deployed:
            raise StepError(f"env_step_id '{self.env_step_id}' names no deployment of env "
                            f"'{self.env_id}' (it is deployed as {deployed})")

    def _writer(self, ctx: TaskContext) -> Write:
        """Where files go: the sandbox ``sandbox_name`` names, else the agent ``agent_name``
        names (into its container), else the env's or the only sandbox."""
        if self.sandbox_name or not self.agent_name:
            return ctx.work_target(self.sandbox_name, self.env_id,
                                   self.container_name).put_file
        put = getattr(ctx.agent(self.agent_name), "put_file", None)
        if put is None:
            raise StepError(f"agent '{self.agent_name}' cannot take files (it has no container "
                            "of its own here); load into a sandbox with sandbox_name")
        return put

    async def _install_cli(self, ctx: TaskContext, artifact: ArtifactContent,
                           write: Write) -> str:
        """A ``cli`` artifact into the agent: its files at ``/opt/cli/<command>/``, the
        entrypoint executable, and beside it ``.env`` naming the env's gateway
        (``AGENT_ENV_GATEWAY_URL``, a capability URL the agent's container reaches)."""
        spec = artifact.cli
        if spec is None or not self.agent_name or self.sandbox_name:
            raise StepError(f"artifact {artifact.id} is a cli artifact: it installs into an "
                            "agent (give agent_name, and env_id for the gateway it calls)")
        if not self.env_id:
            raise StepError(f"artifact {artifact.id} is a cli artifact: give env_id, the env "
                            "whose gateway it calls")
        env = ctx.env(self.env_id)
        root = posixpath.join(CLI_ROOT, spec.command_name)
        for item in artifact.files:
            if has_parent_reference(item.path) or posixpath.isabs(item.path):
                raise StepError(f"artifact {artifact.id} has a file path that escapes its "
                                f"folder: '{item.path}'")
            await write(posixpath.join(root, item.path), item.data,
                        mode=0o755 if item.path == spec.entrypoint else item.mode)
        entrypoint = posixpath.join(root, spec.entrypoint)
        gateway = f"{env.internal_url}/t/{env.token}"
        await write(posixpath.join(posixpath.dirname(entrypoint), GATEWAY_ENV_FILE),
                    f"AGENT_ENV_GATEWAY_URL={gateway}\n".encode(),
                    mode=0o644)  # readable by the agent's own user: the files are root's
        return entrypoint

    def _made_by_step(self, ctx: TaskContext) -> tuple[str, int | None] | None:
        """The artifact ``artifact_from_step_id``'s step stored (``build_mcp_cli``: its output
        names ``artifact_id`` and ``artifact_version``), if it stored one rather than
        collecting files."""
        output = ctx.outputs.get(str(self.artifact_from_step_id)) \
            if self.artifact_from_step_id else None
        if not isinstance(output, dict) or "files" in output \
                or not isinstance(output.get("artifact_id"), str):
            return None
        version = output.get("artifact_version")
        return str(output["artifact_id"]), version if isinstance(version, int) else None

    async def _load_collected(self, ctx: TaskContext, write: Write) -> list[str]:
        """The files ``artifact_from_step_id`` collected, under ``destination_path`` with their
        paths relative to the folder they were collected from."""
        from agent_env.runtime import current

        output = ctx.outputs.get(str(self.artifact_from_step_id))
        files = output.get("files") if isinstance(output, dict) else None
        if not isinstance(output, dict) or not isinstance(files, dict):
            raise StepError(f"artifact_from_step_id '{self.artifact_from_step_id}' recorded no "
                            "files and stored no artifact (it must be a collect_artifacts or "
                            "build_mcp_cli step that ran)")
        base = str(output.get("base_dir") or "/")
        objects = current().object_store
        loaded = []
        for name, meta in sorted(files.items()):
            relative = posixpath.relpath(name, base) if name.startswith(base.rstrip("/") + "/") \
                else posixpath.basename(name)
            path = posixpath.join(self.destination_path, relative)
            await write(path, objects.get(str(meta["key"])))
            loaded.append(path)
        return loaded

    async def run(self, ctx: TaskContext) -> None:
        self._check_env_step(ctx)
        write = self._writer(ctx)
        loaded: list[str] = []
        seeded: list[str] = []
        installed: dict[str, dict[str, str]] = {}
        into: dict[str, str] = {}  # artifact id -> where it was loaded
        made = self._made_by_step(ctx)
        if self.artifact_from_step_id and made is None:
            loaded = await self._load_collected(ctx, write)
        for source in ([made[0]] if made else self.sources()):
            if source.startswith(("http://", "https://")):
                name = posixpath.basename(source.split("?", 1)[0]) or "download"
                data = await _download(source)
                path = posixpath.join(self.destination_path, name)
                await write(path, data)
                loaded.append(path)
                continue
            pinned = (made[1] if made else self.pinned("artifact_id")
                      if source == self.artifact_id
                      else (self.artifact_versions or {}).get(source))
            artifact = await ctx.artifact(source, pinned)
            if (self.env_id and not self.sandbox_name and not self.agent_name
                    and artifact.type in ENVIRONMENT_TYPES):
                seeded.extend(await self._seed(ctx, artifact))
                continue
            if artifact.type == CLI:
                entrypoint = await self._install_cli(ctx, artifact, write)
                installed[artifact.id] = {"command_name": artifact.cli.command_name
                                          if artifact.cli else artifact.id,
                                          "install_path": entrypoint}
                continue
            into[artifact.id] = self.destination_path
            single = len(artifact.files) == 1
            for item in artifact.files:
                if has_parent_reference(item.path) or posixpath.isabs(item.path):
                    raise StepError(f"artifact {artifact.id} has a file path that escapes its "
                                    f"folder: '{item.path}'")
                if single and posixpath.basename(self.destination_path) == item.path:
                    path = self.destination_path
                else:
                    path = posixpath.join(self.destination_path, item.path)
                await write(path, item.data, mode=item.mode)
                loaded.append(path)
        ctx.outputs[self.id] = {"loaded": loaded, **({"seeded": seeded} if seeded else {}),
                                **({"installed_clis": installed} if installed else {}),
                                **({"agent_name": self.agent_name, "artifacts": into}
                                   if self.agent_name and not self.sandbox_name else {})}

    async def _seed(self, ctx: TaskContext, artifact: ArtifactContent) -> list[str]:
        """An environment (universe) artifact into an env: its servers seeded by name."""
        from agent_env.env_data import EnvDataError, LoadedEnvironments, seed_environments
        from agent_env.runtime import current

        try:
            return await seed_environments(
                ctx.env(str(self.env_id)), artifact, progress=ctx.note,
                loads=LoadedEnvironments(current().document_store))
        except EnvDataError as exc:
            raise StepError(str(exc)) from None


async def _download(url: str) -> Any:
    import asyncio
    import urllib.request

    def fetch() -> bytes:
        with urllib.request.urlopen(url, timeout=60) as response:
            return response.read()

    try:
        return await asyncio.to_thread(fetch)
    except OSError as exc:
        raise StepError(f"cannot download {url}: {exc}") from None
