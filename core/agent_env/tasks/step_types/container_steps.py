"""``run_docker_container``: a container of the task's own, in a VM-mode sandbox.

Its own module so a run that does not use it does not build its class (start-up cost).
"""

from __future__ import annotations

import posixpath
import re
import shlex
import shutil
from typing import TYPE_CHECKING, Any

import attrs

from agent_env.tasks.step_types.sandbox_steps import _looks_secret
from agent_env.tasks.steps import PreflightView, Step

if TYPE_CHECKING:
    from agent_env.tasks.context import TaskContext


#: Keys of the reference's ``run_docker_container`` that change what Docker is allowed to do
#: on the host; containers a task starts here run unprivileged, on the sandbox's own networks.
_HOST_KEYS = {
    "network": "a named network",
    "extra_networks": "extra networks",
    "devices": "host devices",
    "cap_add": "added capabilities",
    "privileged": "privileged mode",
    "volumes": "host mounts",
    "shm_size": "a shared-memory size",
}
_CONTAINER_NAME = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,62}$")


@attrs.define(kw_only=True)
class RunDockerContainer(Step):
    """Build an image from a stored build context and run it as a container of a VM sandbox.

    Why: a task may need a service or a workspace of its own beside the agent (a database to
    break, a repository to fix), built from files the task ships. Later steps name it with
    ``container_name``: ``load_artifact`` writes into it, ``run_container_unit_tests_verifier``
    runs its tests in it, ``collect_artifacts`` reads from it. It joins the sandbox's private
    network (no route out unless ``network_policy = "open"``); ``ports`` are published to the
    host. ``wait`` runs it to completion instead (a one-off job): its exit code and last output
    lines are the step's output, and a non-zero exit fails the step.
    """

    type = "run_docker_container"
    entity_fields = {"docker_context_artifact_id": "artifacts"}
    version_fields = {"docker_context_artifact_version": "docker_context_artifact_id"}

    sandbox_name: str
    #: A stored artifact whose files are the build context (the Dockerfile among them).
    docker_context_artifact_id: str | None = None
    docker_context_artifact_version: int | None = None
    docker_context_url: str | None = None
    dockerfile_path: str = "Dockerfile"
    container_name: str = "task-container"
    image_tag: str | None = None
    ports: list[int] = attrs.field(factory=list)
    env_vars: dict[str, str] = attrs.field(factory=dict)
    build_args: dict[str, str] = attrs.field(factory=dict)
    #: The command, as shell words (the image's own when left out).
    command_override: str | None = None
    keep_alive_with_base_command: bool = False
    #: A command run in the container until it succeeds: the step waits for it (at most
    #: ``timeout_seconds``).
    ready_command: str | None = None
    network: str | None = None
    extra_networks: list[str] = attrs.field(factory=list)
    devices: list[str] = attrs.field(factory=list)
    cap_add: list[str] = attrs.field(factory=list)
    privileged: bool = False
    volumes: list[str] = attrs.field(factory=list)
    shm_size: str | None = None
    #: Ours: ``none`` (default: no route out of the sandbox) or ``open``.
    network_policy: str = "none"
    #: Ours: run it to completion and record its exit code and output.
    wait: bool = False
    timeout_seconds: float = 600

    def check(self, view: PreflightView) -> list[str]:
        from agent_env.env_types import ENV_NETWORK_POLICIES

        problems = super().check(view)
        if self.docker_context_url is not None:
            problems.append("docker_context_url: a build context is not fetched from a URL "
                            "here; store the folder as an artifact (agent-env artifact file "
                            "put) and give docker_context_artifact_id")
        elif self.docker_context_artifact_id is None:
            problems.append("names no build context: give docker_context_artifact_id (a "
                            "stored artifact holding the Dockerfile and its files)")
        path = posixpath.normpath(self.dockerfile_path)
        if path.startswith(("/", "..")) or not self.dockerfile_path.strip():
            problems.append(f"dockerfile_path '{self.dockerfile_path}' must be a path inside "
                            "the build context")
        if not _CONTAINER_NAME.match(self.container_name):
            problems.append(f"container_name '{self.container_name}' must be lowercase letters, "
                            "digits, '.', '_' or '-'")
        if self.build_args:
            problems.append("build_args: this builder passes no build arguments; write the "
                            "values into the Dockerfile (ARG defaults)")
        if self.keep_alive_with_base_command:
            problems.append("keep_alive_with_base_command: not supported here; give "
                            "command_override (e.g. \"sh -c 'my-server & sleep infinity'\")")
        for key, what in _HOST_KEYS.items():
            if getattr(self, key):
                problems.append(f"{key}: containers a task starts here run unprivileged on "
                                f"the sandbox's own networks, so {what} cannot be given")
        if self.network_policy not in ENV_NETWORK_POLICIES:
            problems.append(f"network_policy must be one of {', '.join(ENV_NETWORK_POLICIES)}, "
                            f"not {self.network_policy!r}")
        bad = [p for p in self.ports if not 0 < p < 65536]
        if bad:
            problems.append(f"ports: {bad[0]} is not a port")
        if self.command_override is not None:
            try:
                shlex.split(self.command_override)
            except ValueError as exc:
                problems.append(f"command_override does not parse as shell words: {exc}")
        if self.timeout_seconds <= 0:
            problems.append("timeout_seconds must be positive")
        return problems

    async def run(self, ctx: TaskContext) -> None:
        import time

        from agent_env.errors import UserError
        from agent_env.sandbox.base import ContainerSpec, SandboxUnsupported
        from agent_env.scratch import owned_scratch
        from agent_env.tasks.artifacts import safe_targets
        from agent_env.tasks.steps import StepError

        sandbox = ctx.sandbox(self.sandbox_name)
        assert self.docker_context_artifact_id is not None  # check() said so
        content = await ctx.artifact(self.docker_context_artifact_id,
                                     self.docker_context_artifact_version)
        dockerfile = posixpath.normpath(self.dockerfile_path)
        if not any(f.path == dockerfile for f in content.files):
            raise StepError(f"artifact '{content.id}' v{content.version} holds no "
                            f"{dockerfile} (its files: "
                            f"{', '.join(sorted(f.path for f in content.files)[:10])})")
        tag = self.image_tag or f"agentenv-task-{self.container_name}"
        try:
            with owned_scratch("agent-env-task-container-") as folder:
                try:
                    targets = safe_targets(folder, [item.path for item in content.files])
                except UserError as exc:
                    raise StepError(f"artifact '{content.id}': {exc}") from None
                for item in content.files:
                    target = targets[item.path]
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_bytes(item.data)
                    target.chmod(item.mode)
                if dockerfile != "Dockerfile":
                    shutil.copyfile(folder / dockerfile, folder / "Dockerfile")
                ctx.note(f"building {self.container_name} from {content.id} v{content.version}")
                image = await sandbox.build_image(str(folder), tag,
                                                  labels={"agentenv.role": "task-container"})
            command = tuple(shlex.split(self.command_override)) if self.command_override \
                else None
            urls = await sandbox.run_container(ContainerSpec(
                name=self.container_name, image=image, env=dict(self.env_vars),
                command=command, publish=tuple(self.ports),
                labels={**ctx.labels, "agentenv.role": "task-container",
                        "agentenv.step": self.id},
                outbound=self.network_policy == "open"))
        except SandboxUnsupported as exc:
            raise StepError(f"sandbox '{self.sandbox_name}' cannot run a task's container: "
                            f"{exc} (deploy it with sandbox_mode vm on a provider that runs "
                            "containers, such as docker)") from None
        ctx.add_task_container(sandbox, self.container_name)
        for value in self.env_vars.values():
            if _looks_secret(value):
                ctx.register_secret(value)
        output: dict[str, Any] = {"container_name": self.container_name,
                                  "sandbox_name": self.sandbox_name, "image": image,
                                  "ports": {str(p): u for p, u in urls.items()}}
        ctx.outputs[self.id] = output
        deadline = time.monotonic() + self.timeout_seconds
        if self.ready_command:
            await self._wait_ready(sandbox, deadline)
        if self.wait:
            output.update(await self._wait_exit(sandbox, deadline))

    async def _gone_why(self, sandbox: Any) -> str | None:
        status = await sandbox.container_status(self.container_name)
        if status is None or status == "running" or status.startswith("created"):
            return None
        logs = (await sandbox.container_logs(self.container_name, tail=10)).strip()
        return f"container {self.container_name} {status}" + (f":\n{logs}" if logs else "")

    async def _wait_ready(self, sandbox: Any, deadline: float) -> None:
        import asyncio
        import time

        from agent_env.sandbox.base import SandboxError
        from agent_env.tasks.steps import StepError

        assert self.ready_command is not None
        last = ""
        while time.monotonic() < deadline:
            try:
                done = await sandbox.container_exec(
                    self.container_name, self.ready_command,
                    timeout=max(1.0, min(30.0, deadline - time.monotonic())))
            except SandboxError as exc:  # stopped under the command: said below
                last = str(exc)
            else:
                if done.ok:
                    return
                last = (done.stderr or done.stdout).strip()[-200:]
            if (why := await self._gone_why(sandbox)) is not None:
                raise StepError(f"{why}\n(before its ready_command passed)")
            await asyncio.sleep(0.5)
        raise StepError(f"container {self.container_name}: ready_command "
                        f"{self.ready_command!r} did not pass within {self.timeout_seconds:g} s"
                        + (f" (last: {last})" if last else ""))

    async def _wait_exit(self, sandbox: Any, deadline: float) -> dict[str, Any]:
        import asyncio
        import re as re_
        import time

        from agent_env.tasks.steps import StepError

        while time.monotonic() < deadline:
            status = await sandbox.container_status(self.container_name)
            if status is None:
                raise StepError(f"the '{sandbox.provider_name}' sandbox cannot tell when a "
                                "container exits; leave wait out")
            if status.startswith("exited") or status == "gone":
                logs = await sandbox.container_logs(self.container_name, tail=50)
                found = re_.search(r"code (-?\d+)", status)
                code = int(found.group(1)) if found else None
                result = {"exit_code": code, "status": status, "output_tail": logs[-2000:]}
                if code != 0:
                    raise StepError(f"container {self.container_name} {status}"
                                    + (f":\n{logs.strip()[-500:]}" if logs.strip() else ""))
                return result
            await asyncio.sleep(0.3)
        raise StepError(f"container {self.container_name} still ran after "
                        f"{self.timeout_seconds:g} s (wait)")
