"""``load_artifact``: copy artifacts (or files at URLs) into a sandbox.

The destination is a folder: an artifact's files keep their relative paths under it. A
single-file artifact whose destination ends with the file's own name lands exactly there.
A destination with ``..`` is refused before the run; the sandbox refuses any other escape.
"""

from __future__ import annotations

import posixpath
from typing import TYPE_CHECKING, Any

import attrs

from agent_env.tasks.steps import PreflightView, Step, StepError

if TYPE_CHECKING:
    from agent_env.sandbox.base import Sandbox
    from agent_env.tasks.context import TaskContext

DEFAULT_DESTINATION = "/app"


def has_parent_reference(path: str) -> bool:
    return ".." in path.replace("\\", "/").split("/")


@attrs.define(kw_only=True)
class LoadArtifact(Step):
    type = "load_artifact"
    entity_fields = {"artifact_id": "artifacts", "artifacts": "artifacts"}
    version_fields = {"artifact_version": "artifact_id"}

    artifact_id: str | None = None
    artifact_version: int | None = None
    artifacts: list[str] | None = None
    urls: list[str] | None = None
    destination_path: str = DEFAULT_DESTINATION
    sandbox_name: str | None = None
    env_id: str | None = None
    agent_name: str | None = None

    def sources(self) -> list[str]:
        return [*([self.artifact_id] if self.artifact_id else []), *(self.artifacts or []),
                *(self.urls or [])]

    def check(self, view: PreflightView) -> list[str]:
        problems = super().check(view)
        if not self.sources():
            problems.append("names nothing to load (give artifact_id, artifacts or urls)")
        if has_parent_reference(self.destination_path):
            problems.append(
                f"destination_path '{self.destination_path}' leaves its folder through '..'"
            )
        if self.agent_name and not (self.sandbox_name or self.env_id):
            problems.append("loading into an agent is not supported yet; give sandbox_name")
        return problems

    def target(self, ctx: TaskContext) -> Sandbox:
        if self.sandbox_name:
            return ctx.sandbox(self.sandbox_name)
        if self.env_id:
            host = getattr(ctx.env(self.env_id), "sandbox", None)
            if host is None:
                raise StepError(f"env '{self.env_id}' has no sandbox to load files into")
            return host
        if len(ctx.sandboxes) == 1:
            return next(iter(ctx.sandboxes.values()))
        raise StepError("give sandbox_name: more than one sandbox is up"
                        if ctx.sandboxes else "no sandbox is up to load into")

    async def run(self, ctx: TaskContext) -> None:
        sandbox = self.target(ctx)
        loaded: list[str] = []
        for source in self.sources():
            if source.startswith(("http://", "https://")):
                name = posixpath.basename(source.split("?", 1)[0]) or "download"
                data = await _download(source)
                path = posixpath.join(self.destination_path, name)
                await sandbox.put_file(path, data)
                loaded.append(path)
                continue
            pinned = self.pinned("artifact_id") if source == self.artifact_id else None
            artifact = await ctx.artifact(source, pinned)
            single = len(artifact.files) == 1
            for item in artifact.files:
                if has_parent_reference(item.path) or posixpath.isabs(item.path):
                    raise StepError(f"artifact {artifact.id} has a file path that escapes its "
                                    f"folder: '{item.path}'")
                if single and posixpath.basename(self.destination_path) == item.path:
                    path = self.destination_path
                else:
                    path = posixpath.join(self.destination_path, item.path)
                await sandbox.put_file(path, item.data, mode=item.mode)
                loaded.append(path)
        ctx.outputs[self.id] = {"loaded": loaded}


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
