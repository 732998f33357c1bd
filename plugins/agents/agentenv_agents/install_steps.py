"""``install_agent``: an A2A agent started inside a task's own container (install/v1).

Why: some tasks want the agent where the work is (the repository to fix, the tools the task
ships in its container), not in an image of its own beside it. The agent must be built on the
agent SDK and list install/v1 (:mod:`agentenv_protocol.agent.install`); the model-agent does.

How, on a provider that runs containers (a ``vm`` sandbox):

1. the agent's image is built as ``deploy_agent`` builds it, and run once, sealed, with
   ``AGENTENV_INSTALL_EXPORT``: it writes an archive of its files and Python packages and exits
   (container ``agent-<name>-export``, left stopped until the sandbox goes);
2. the archive is checked here (plain files and folders under ``app/`` and ``site/``, a
   manifest whose card lists install/v1 and which says how to start the agent) and unpacked
   in the task's container under
   ``/opt/agentenv-agent-<port>`` (root's alone: it holds the model token), replacing an
   earlier install at that port;
3. the agent starts there as root with the container's own ``python3`` (3.11 or later), on the
   port the task's ``run_docker_container`` published (``ports``), and reaches its model through
   the sandbox's model gateway with a per-run token, never a provider key. Its card must answer
   within ``timeout_seconds``, else the step fails with the agent's last log lines.

The agent lives in that container: it has the container's network, which, since the container
publishes a port, includes a route out (the output says ``network_policy: open``). It stops with
the container, at teardown. A player from outside AgentEnv (the episode API) stands in for it
as for ``deploy_agent``: nothing is installed then.
"""

from __future__ import annotations

import io
import json
import posixpath
import shlex
import tarfile
import time
from typing import TYPE_CHECKING, Any

import attrs

from agent_env.api import (
    DEFAULT_AGENT_NAME,
    DEPLOYS,
    AgentSetup,
    ChoiceProblem,
    PreflightView,
    RunChoices,
    Step,
    StepError,
    default_agent_id,
)
from agentenv_protocol.agent.framework import INSTALL_V1
from agentenv_protocol.agent.install import EXPORT_ENV, MANIFEST, MIN_PYTHON

if TYPE_CHECKING:
    from agent_env.api import TaskContext

EXPORT_PATH = "/tmp/agentenv-install.tar.gz"
#: The oldest ``python3`` the container may have: the SDK's floor, as its export says.
MIN_VERSION = tuple(int(p) for p in MIN_PYTHON.split("."))
EXPORT_TIMEOUT = 120.0
#: What an archive from the agent's image may hold: the manifest, ``app/...``, ``site/...``.
_TOPS = ("app", "site")
_MAX_ARCHIVE = 512 * 1024 * 1024


@attrs.define(kw_only=True)
class InstallAgent(Step):
    """Install the agent ``a2a_agent_id`` names into container ``container_name`` and start it."""

    type = "install_agent"
    agent_role = DEPLOYS
    entity_fields = {"a2a_agent_id": "agents"}
    version_fields = {"a2a_agent_version": "a2a_agent_id"}
    installed_entity_fields = frozenset({"a2a_agent_id"})
    example = {
        "id": "install",
        "type": "install_agent",
        "depends_on": ["app"],
        "sandbox_name": "box",
        "container_name": "workspace",
        "a2a_agent_id": "model-agent",
        "agent_name": "agent",
    }

    sandbox_name: str
    #: The container a ``run_docker_container`` step started, with ``ports`` holding the
    #: agent's port. The reference also installs onto the sandbox's host (no container_name),
    #: which is refused here: the host of a local sandbox is this machine.
    container_name: str | None = None
    a2a_agent_id: str | None = None
    a2a_agent_version: int | None = None
    agent_name: str = DEFAULT_AGENT_NAME
    #: The port the agent listens on in the container (default: its card's, 8000).
    a2a_port: int | None = None
    #: The agent process's working folder (default: the container's).
    workspace_dir: str | None = None
    #: Ours, sent over agent-config as ``deploy_agent`` sends them. It gets no env's tools:
    #: an env runs in a sandbox of its own, which a task's container cannot reach.
    role: str | None = None
    system_prompt: str | None = None
    #: Ours: how long the export, and then the installed agent's card, may take.
    timeout_seconds: float = 120.0

    def check(self, view: PreflightView) -> list[str]:
        problems = super().check(view)
        if self.container_name is None:
            problems.append("names no container_name: an agent is installed into a task's "
                            "container here (start it with run_docker_container, publishing "
                            "the agent's port in its ports), not onto the sandbox's host")
        if not self.agent_name.strip():
            problems.append("agent_name must not be empty")
        port = self.a2a_port
        if port is not None and (isinstance(port, bool) or not 0 < port < 65536):
            problems.append(f"a2a_port: {port} is not a port")
        if self.workspace_dir is not None and not posixpath.isabs(self.workspace_dir):
            problems.append(f"workspace_dir '{self.workspace_dir}' must be an absolute path")
        if self.timeout_seconds <= 0:
            problems.append("timeout_seconds must be positive")
        return problems

    def needs(self, choices: RunChoices) -> list[str]:
        """The agent must be installed or stored, and of the ``a2a`` type."""
        from agent_env.api import UserError
        from agentenv_agents.lookup import find_agent

        agent_id = choices.agent or self.a2a_agent_id or default_agent_id()
        if agent_id is None:
            return []  # only an outside player can play it: said when the step runs
        try:
            found = find_agent(agent_id, None if choices.agent else self.a2a_agent_version)
        except UserError as exc:
            return [ChoiceProblem(exc) if choices.agent else str(exc)]
        if found.type != "a2a":
            return [f"agent '{agent_id}' is a {found.type} agent; install_agent installs an "
                    "A2A agent built on the agent SDK whose card lists install/v1"]
        return []

    async def run(self, ctx: TaskContext) -> None:
        if self.agent_name in ctx.agents:
            raise StepError(f"an agent named '{self.agent_name}' is already deployed in this task")
        sandbox = ctx.sandbox(self.sandbox_name)
        assert self.container_name is not None  # check() said so
        target = ctx.work_target(self.sandbox_name, None, self.container_name, "0")
        # an outside player's bash runs in the container, where the agent would have worked
        setup = AgentSetup(self.agent_name, self.role, self.system_prompt, {}, target,
                           self.sandbox_name, None)
        outside = ctx.outside_agent(setup)
        if outside is not None:
            ctx.agents[self.agent_name] = outside
            ctx.outputs[self.id] = {**outside.describe(), "installed": False}
            return
        agent = await self._install(ctx, sandbox, target, setup)
        ctx.agents[self.agent_name] = agent.agent
        ctx.outputs[self.id] = {**agent.agent.describe(), "installed": True,
                                "installed_in": self.container_name, "root": agent.root,
                                "python": agent.python, "port": agent.port,
                                **({"role": self.role} if self.role else {})}

    def _published(self, ctx: TaskContext, port: int) -> str:
        """The URL of ``port`` of the container, as its ``run_docker_container`` published it."""
        for output in ctx.outputs.values():
            if (isinstance(output, dict) and output.get("container_name") == self.container_name
                    and output.get("sandbox_name") == self.sandbox_name
                    and isinstance(output.get("ports"), dict)):
                url = output["ports"].get(str(port))
                if url:
                    return str(url).rstrip("/")
                published = ", ".join(sorted(output["ports"])) or "none"
                raise StepError(f"container '{self.container_name}' does not publish port "
                                f"{port}, which the agent listens on (published: {published}); "
                                f"add {port} to ports of its run_docker_container step, or set "
                                "a2a_port to one it publishes")
        raise StepError(f"no run_docker_container step started '{self.container_name}' in "
                        f"sandbox '{self.sandbox_name}'")

    async def _install(self, ctx: TaskContext, sandbox: Any, target: Any,
                       setup: AgentSetup) -> Installed:
        import secrets

        from agent_env.api import current
        from agentenv_agents.a2a_type import (
            A2aAgent,
            _configure,
            _slug,
            agent_environment,
            agent_image,
            agent_model,
            model_gateway,
        )
        from agentenv_agents.lookup import find_agent

        agent_id = ctx.choices.agent or self.a2a_agent_id or default_agent_id()
        if agent_id is None:
            raise StepError(f"agent '{self.agent_name}' has nothing to install: the step names "
                            "no a2a_agent_id and no [agents] default is configured")
        source = find_agent(agent_id, None if ctx.choices.agent else self.a2a_agent_version)
        current().host.lookup("agent_type", source.type)  # a missing plugin: said by name
        if source.type != "a2a":
            raise StepError(f"agent '{agent_id}' is a {source.type} agent; install_agent "
                            "installs an A2A agent whose card lists install/v1")

        def say(line: str) -> None:
            ctx.note(line)

        gateway = await model_gateway(ctx, sandbox, say)
        image = await agent_image(sandbox, source, say)
        archive, manifest = await self._export(ctx, sandbox, image, _slug(self.agent_name))
        port = self.a2a_port or int(manifest.get("a2a_port") or 8000)
        url = self._published(ctx, port)
        for other in ctx.agents.values():
            if getattr(other, "url", None) == url:
                raise StepError(f"port {port} of '{self.container_name}' already serves agent "
                                f"'{other.name}'; give this step another a2a_port")
        python = await self._python(target, source.name)
        root = f"/opt/agentenv-agent-{port}"
        say(f"agents/{source.name}: installing into container '{self.container_name}' "
            f"({len(archive) // 1024} KiB, Python {python})")
        await self._unpack(target, root, archive)
        model = agent_model(ctx, source)
        token, model_token = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
        ctx.register_secret(token)
        ctx.register_secret(model_token)
        caller = f"{self.container_name}-agent-{port}"
        await gateway.add_caller(caller, model_token)
        env = agent_environment(
            source, {"PYTHONUNBUFFERED": "1", "PYTHONPATH": f"{root}/app:{root}/site"},
            port=port, token=token, model_base_url=gateway.private_base_url,
            model_token=model_token, model=model,
            role=self.role)
        await self._start(target, root, env, [str(a) for a in manifest["command"]])
        card = await self._wait_card(target, root, url, source.name)
        agent = A2aAgent(self.agent_name, source.name, url, self.container_name or "", image,
                         model, card, sandbox, gateway, ctx, [], token=token,
                         network_policy="open", caller=caller,
                         peer_url=f"http://{self.container_name}:{port}")
        await _configure(agent, card, setup, setup.envs, self)
        ctx.add_endpoint(f"agent '{self.agent_name}' ({source.name}, installed), A2A", url,
                         token)
        say(f"agents/{source.name}: '{self.agent_name}' ready in '{self.container_name}' at "
            f"{url} (model {model or 'named per prompt'})")
        return Installed(agent, root, python, port)

    async def _export(self, ctx: TaskContext, sandbox: Any, image: str,
                      slug: str) -> tuple[bytes, dict[str, Any]]:
        """Run the agent's image once to export itself; the archive and its manifest."""
        import asyncio

        from agent_env.api import ContainerSpec

        name = f"agent-{slug}-export"
        await sandbox.run_container(ContainerSpec(
            name=name, image=image, env={EXPORT_ENV: EXPORT_PATH},
            labels={**ctx.labels, "agentenv.role": "agent-export", "agentenv.step": self.id},
            private=False, sealed=True))
        deadline = time.monotonic() + self.timeout_seconds
        while True:
            status = await sandbox.container_status(name) or "gone"
            if status.startswith("exited") or status == "gone":
                break
            if time.monotonic() > deadline:
                raise StepError(f"the agent's image {image} did not export itself within "
                                f"{self.timeout_seconds:g} s: an agent built on the agent SDK "
                                "whose card lists install/v1 does, and exits")
            await asyncio.sleep(0.2)
        if status != "exited with code 0":
            logs = (await sandbox.container_logs(name, tail=10)).strip()
            raise StepError(f"the agent's image {image} did not export itself ({status})"
                            + (f":\n{logs}" if logs else ""))
        data = await sandbox.get_container_file(name, EXPORT_PATH)
        return data, read_archive(data, image)

    async def _python(self, target: Any, agent: str) -> str:
        done = await target.exec(["python3", "-c",
                                  "import sys; print('%d.%d' % sys.version_info[:2])"],
                                 timeout=30)
        version = done.stdout.strip()
        fix = f"add python3 (3.11 or later) to the image of '{self.container_name}'"
        if not done.ok or not version:
            raise StepError(f"container '{self.container_name}' has no python3, which runs "
                            f"the installed {agent}; {fix}")
        if tuple(int(p) for p in version.split(".")) < MIN_VERSION:
            raise StepError(f"container '{self.container_name}' has Python {version}; the "
                            f"installed {agent} needs 3.11 or later: {fix}")
        return version

    async def _unpack(self, target: Any, root: str, archive: bytes) -> None:
        staged = f"{root}.tar.gz"
        await target.put_file(staged, archive, mode=0o600)
        r, s = shlex.quote(root), shlex.quote(staged)
        done = await target.exec(["sh", "-c", _STOP.format(root=r) + (
            f"rm -rf {r} && mkdir -m 0700 {r} && tar -xzf {s} -C {r} --no-same-owner "
            f"--no-same-permissions; code=$?; rm -f {s}; exit $code")], timeout=120)
        if not done.ok:
            raise StepError(f"could not unpack the agent in '{self.container_name}': "
                            f"{(done.stderr or done.stdout).strip()[-300:]} (it needs tar)")

    async def _start(self, target: Any, root: str, env: dict[str, str],
                     command: list[str]) -> None:
        lines = "".join(f"{k}={shlex.quote(v)}\n" for k, v in env.items())
        await target.put_file(f"{root}/agent.env", lines.encode(), mode=0o600)
        args = list(command)
        if args and args[0] != "-m":
            args[0] = f"{root}/app/{args[0]}"
        r = shlex.quote(root)
        inner = f"set -a; . {r}/agent.env; set +a; exec python3 -s {shlex.join(args)}"
        cwd = shlex.quote(self.workspace_dir) if self.workspace_dir else "."
        # cd first, on its own: "cd && nohup ... &" would background a subshell, whose pid
        # is not the agent's
        done = await target.exec(["sh", "-c", (
            f"cd {cwd} || exit 1; nohup sh -c {shlex.quote(inner)} > {r}/agent.log 2>&1 "
            f"< /dev/null & echo $! > {r}/agent.pid")], timeout=30)
        if not done.ok:
            raise StepError(f"could not start the agent in '{self.container_name}': "
                            f"{(done.stderr or done.stdout).strip()[-300:]}")

    async def _wait_card(self, target: Any, root: str, url: str, agent: str) -> dict[str, Any]:
        import asyncio

        import aiohttp

        r = shlex.quote(root)
        deadline = time.monotonic() + self.timeout_seconds
        checked = time.monotonic()
        last = "no answer"
        async with aiohttp.ClientSession() as http:
            while True:
                try:
                    async with http.get(f"{url}/.well-known/agent-card.json",
                                        timeout=aiohttp.ClientTimeout(total=3)) as resp:
                        if resp.status == 200:
                            card = await resp.json(content_type=None)
                            if isinstance(card, dict):
                                return card
                        last = f"HTTP {resp.status}"
                except (TimeoutError, aiohttp.ClientError, ValueError) as exc:
                    last = str(exc) or type(exc).__name__
                now = time.monotonic()
                if now - checked > 1.0 or now > deadline:
                    checked = now
                    alive = await target.exec(["sh", "-c", f"kill -0 $(cat {r}/agent.pid)"],
                                              timeout=10)
                    if not alive.ok or now > deadline:
                        log = await target.exec(["tail", "-n", "15", f"{root}/agent.log"],
                                                timeout=10)
                        what = "stopped before it was ready" if not alive.ok else \
                            f"was not ready within {self.timeout_seconds:g} s ({last})"
                        raise StepError(f"the {agent} installed in '{self.container_name}' "
                                        f"{what}; its last log lines:\n"
                                        f"{log.stdout.strip() or '(no output)'}")
                await asyncio.sleep(0.2)


#: Stops an agent an earlier install started at this root (a retried step), then goes on.
_STOP = ("if [ -f {root}/agent.pid ]; then kill $(cat {root}/agent.pid) 2>/dev/null; "
         "i=0; while [ $i -lt 50 ] && kill -0 $(cat {root}/agent.pid) 2>/dev/null; do "
         "sleep 0.1; i=$((i+1)); done; kill -9 $(cat {root}/agent.pid) 2>/dev/null; fi; ")


@attrs.frozen
class Installed:
    agent: Any
    root: str
    python: str
    port: int


def read_archive(data: bytes, image: str) -> dict[str, Any]:
    """The manifest of an install archive, once every member is checked: plain files and
    folders under ``app/`` or ``site/`` (no links, no absolute or ``..`` paths)."""
    if len(data) > _MAX_ARCHIVE:
        raise StepError(f"the agent's image {image} exported {len(data) // 2**20} MiB, more "
                        f"than the {_MAX_ARCHIVE // 2**20} MiB an install takes")
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as archive:
            manifest: Any = None
            for member in archive.getmembers():
                name = member.name
                parts = name.split("/")
                if name == MANIFEST and member.isfile():
                    handle = archive.extractfile(member)
                    manifest = json.loads(handle.read()) if handle else None
                    continue
                if (name.startswith("/") or ".." in parts or parts[0] not in _TOPS
                        or not (member.isfile() or member.isdir())):
                    raise StepError(f"the agent's image {image} exported '{name}', which an "
                                    "install does not take (plain files under app/ and site/)")
    except (tarfile.TarError, OSError, ValueError) as exc:
        raise StepError(f"the agent's image {image} exported no readable archive: "
                        f"{exc}") from None
    if not isinstance(manifest, dict):
        raise StepError(f"the agent's image {image} exported no {MANIFEST}")
    card, command = manifest.get("card"), manifest.get("command")
    extensions = ((card or {}).get("capabilities") or {}).get("extensions") or [] \
        if isinstance(card, dict) else []
    if not any(isinstance(e, dict) and e.get("uri") == INSTALL_V1 for e in extensions):
        raise StepError(f"the agent's image {image} exported a card without install/v1")
    if not (isinstance(command, list) and command and all(isinstance(a, str) for a in command)):
        raise StepError(f"the agent's image {image} exported no command to start it")
    return manifest
