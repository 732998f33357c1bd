"""A step that writes a file into a sandbox, and a bundle that checks it."""

from pathlib import Path

import attrs

from agent_env.api import BundleSource, Step, TaskContext, hookimpl


@attrs.define(kw_only=True)
class WriteFile(Step):
    type = "write_file"

    sandbox_name: str
    path: str
    content: str

    async def run(self, ctx: TaskContext) -> None:
        await ctx.sandbox(self.sandbox_name).put_file(self.path, self.content.encode())


@hookimpl
def agent_env_step_types():
    return [WriteFile]


@hookimpl
def agent_env_bundles():
    return [BundleSource("write-file-demo", Path(__file__).parent / "bundle")]
