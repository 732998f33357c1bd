"""The context the steps of one task run share.

It holds what earlier steps brought up (sandboxes by name, deployed envs by id, agents), what
verifiers decided, the run's metadata and step outputs, and the secrets to keep out of records.
Steps bring things up through it so that the caller's teardown always finds them.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from agent_env.tasks.records import SandboxRecord, storage_problem, unstorable_scalar
from agent_env.tasks.scores import ScoreRow, Verification, aggregate
from agent_env.tasks.steps import RunChoices, StepError
from agent_env.tasks.teardown import Close, Endpoint, Teardown, TeardownItem

if TYPE_CHECKING:
    from agent_env.agents import Agent, AgentSetup
    from agent_env.sandbox.base import Sandbox, SandboxSpec
    from agent_env.tasks.artifacts import ArtifactContent, ArtifactSource
    from agent_env.tasks.resume import Resume
    from agent_env.tasks.steps import Step

#: Keys whose values are never recorded. ``token`` only at the end (``token``, ``access_token``,
#: ``gatewayToken``), so counts such as ``input_tokens`` stay in usage records.
_SECRET_KEY = re.compile(r"(api[_-]?key|token$|secret|password|credential|authorization)", re.I)
REDACTED = "****"


@attrs.frozen
class Watch:
    """What one of :attr:`TaskContext.watches` watches: a label for the failure line, and the
    sandbox it lives in."""

    label: str
    sandbox: Sandbox | None = None


class TaskContext:
    """Shared state of one task run. Steps read and write it; the engine records a snapshot."""

    def __init__(
        self,
        *,
        task_id: str,
        instance_id: str,
        artifacts: ArtifactSource,
        teardown: Teardown | None = None,
        metadata: dict[str, Any] | None = None,
        sandbox_chain: Sequence[str] | None = None,
        labels: dict[str, str] | None = None,
        choices: RunChoices | None = None,
        seed: Mapping[str, Any] | None = None,
    ) -> None:
        self.task_id = task_id
        self.instance_id = instance_id
        self.artifacts = artifacts
        self.teardown = teardown if teardown is not None else Teardown()
        #: Free-form run metadata (``seed``...); recorded with secrets stripped.
        self.metadata: dict[str, Any] = dict(metadata or {})
        #: What the run's caller chose for every step (``--model``, ``--agent``).
        self.choices = choices if choices is not None else RunChoices()
        #: ``<name>`` -> value, replaced in every string of every step (``--seed``); kept in
        #: the record's metadata too.
        self.seed: dict[str, Any] = dict(seed or {})
        if self.seed:
            self.metadata["seed"] = dict(self.seed)
        #: Why the run was cancelled (``Ctrl-C``, ``SIGTERM``, an episode abandoned), once it is.
        self.cancel_reason: str | None = None
        #: ``--sandbox``: when set, it replaces every step's own ``sandbox_type``.
        self.sandbox_chain: list[str] | None = list(sandbox_chain) if sandbox_chain else None
        self.labels = {"agentenv.run": instance_id, **(labels or {})}
        self.sandboxes: dict[str, Sandbox] = {}
        #: Every sandbox made, with its provider and the providers passed over (the record's).
        self.sandbox_records: list[SandboxRecord] = []
        self.envs: dict[str, Any] = {}
        self.agents: dict[str, Any] = {}
        self.verifications: dict[str, Verification] = {}
        #: Results steps hand to later steps and to the record, by step id (``run_code``...).
        self.outputs: dict[str, Any] = {}
        #: What plugins keep for the length of this run, by their own keys (never recorded):
        #: e.g. the model gateway the agents of one sandbox share.
        self.state: dict[str, Any] = {}
        self._secrets: set[str] = set()
        self._sandbox_items: dict[str, TeardownItem] = {}
        #: Where ``note`` lines go: the run's progress display (None: nobody is listening).
        self.note_sink: Callable[[str], None] | None = None
        #: The run's own model endpoint (OpenAI-compatible base URL, bearer token), when a
        #: plugin serves one (the agents plugin's model gateway): a judge asks it before the
        #: configured upstream, so scripted models answer and every call is logged with tokens.
        self.model_endpoint: tuple[str, str] | None = None
        #: What the run deployed and watches while it runs (see :meth:`watch`): each task
        #: returns why its subject went down, or None once it stops watching.
        self.watches: dict[asyncio.Future[str | None], Watch] = {}
        #: Containers ``run_docker_container`` started, by the id of their sandbox.
        self.task_containers: dict[str, set[str]] = {}
        #: The run this one continues (``task run --start-step``), if any: its skipped steps'
        #: outputs and verifications are this context's from the start.
        self.resume: Resume | None = None

    def continue_from(self, resume: Resume) -> None:
        """Take the steps before ``resume.start_step`` as done, with what the saved run
        recorded for them (see :mod:`agent_env.tasks.resume`)."""
        import copy

        self.resume = resume
        self.outputs.update(copy.deepcopy(resume.outputs))
        self.verifications.update(resume.verifications)
        self.metadata["resumed_from"] = resume.describe()

    def note(self, text: str) -> None:
        """A progress line for whoever watches the run (the CLI prints it under the task)."""
        if self.note_sink is not None:
            self.note_sink(self.strip_secrets(text))

    # -- sandboxes -------------------------------------------------------------------------

    def provider_chain(self, sandbox_type: str | None, *, role: str | None = None,
                       ) -> list[str]:
        """Providers to try for a step: for an ``agent`` or an ``env`` (``role``) the run's
        ``--agent-sandbox`` / ``--env-sandbox``, else ``--sandbox``, else the step's, else the
        config's (``[sandbox] agent_default`` for an agent, then ``default``)."""
        from agent_env.sandbox.chain import split_chain

        override = {"agent": self.choices.agent_sandbox,
                    "env": self.choices.env_sandbox}.get(role or "")
        if override:
            return split_chain(override)
        if self.sandbox_chain:
            return list(self.sandbox_chain)
        if sandbox_type:
            return split_chain(sandbox_type)
        from agent_env.runtime import current

        return current().config.sandbox_chain(agent=role == "agent")

    async def create_sandbox(self, spec: SandboxSpec, sandbox_type: str | None = None) -> Sandbox:
        """Create a sandbox, register it by ``spec.name`` and for teardown, and return it."""
        import attrs

        from agent_env.tasks.sandboxes import create_in_chain

        if spec.name in self.sandboxes:
            raise StepError(f"a sandbox named '{spec.name}' is already up in this task")
        spec = attrs.evolve(spec, labels={**self.labels, **spec.labels})
        sandbox, passed_over = await create_in_chain(self.provider_chain(sandbox_type), spec,
                                                     note=self.note)
        self.add_sandbox(spec.name, sandbox, passed_over)
        return sandbox

    def add_sandbox(self, name: str, sandbox: Sandbox, passed_over: Sequence[str] = ()) -> None:
        """Register a sandbox made elsewhere (an env type's host) by name, for teardown and the
        record too (``passed_over``: the providers of its chain that could not make it)."""
        self.sandboxes[name] = sandbox
        self.sandbox_records.append(SandboxRecord(name, sandbox.provider_name, sandbox.id,
                                                  list(passed_over)))
        async def gone() -> bool:
            from agent_env.tasks.sandboxes import open_provider

            return await open_provider(sandbox.provider_name).attach(sandbox.id) is None

        self._sandbox_items[name] = self.teardown.register(
            "sandbox", f"sandbox {name} ({sandbox.provider_name} {sandbox.id})", sandbox.terminate,
            gone,
        )

    def sandbox(self, name: str) -> Sandbox:
        """The sandbox an earlier step deployed as ``name``."""
        try:
            return self.sandboxes[name]
        except KeyError:
            self._left_behind("sandboxes", name)
            up = ", ".join(sorted(self.sandboxes)) or "none"
            raise StepError(f"no sandbox named '{name}' is up (up: {up})") from None

    def target_sandbox(self, name: str | None, env_id: str | None = None) -> Sandbox:
        """The sandbox a step works in: the one named ``name``, else the deployed env
        ``env_id``'s, else the only one up; StepError saying which to name otherwise."""
        if name:
            return self.sandbox(name)
        if env_id:
            sandbox = getattr(self.env(env_id), "sandbox", None)
            if sandbox is None:
                raise StepError(f"env '{env_id}' has no sandbox of its own to work in")
            return sandbox
        if len(self.sandboxes) == 1:
            return next(iter(self.sandboxes.values()))
        raise StepError("give sandbox_name: " + (
            "more than one sandbox is up" if self.sandboxes else "no sandbox is up"))

    def add_task_container(self, sandbox: Sandbox, name: str) -> None:
        """Remember a container a step started in ``sandbox`` (later steps name it)."""
        self.task_containers.setdefault(sandbox.id, set()).add(name)

    def work_target(self, sandbox_name: str | None, env_id: str | None = None,
                    container_name: str | None = None, user: str | None = None) -> Sandbox:
        """Where a step works: :meth:`target_sandbox`, or with ``container_name`` the
        container of that sandbox a ``run_docker_container`` step started (commands as
        ``user``); StepError naming what is missing."""
        sandbox = self.target_sandbox(sandbox_name, env_id)
        if container_name is None:
            return sandbox
        if container_name not in self.task_containers.get(sandbox.id, ()):
            started = ", ".join(sorted(self.task_containers.get(sandbox.id, ()))) or "none"
            raise StepError(f"no container '{container_name}' was started in sandbox "
                            f"{sandbox.id} (started: {started}); a run_docker_container step "
                            "before this one starts it")
        from agent_env.sandbox.container_shell import ContainerShell

        return ContainerShell(sandbox, container_name, user)

    async def tear_down_sandbox(self, name: str) -> bool:
        """Take one sandbox down now; False when it could not be (it stays in the report)."""
        item = self._sandbox_items.pop(name, None)
        self.sandboxes.pop(name, None)
        return True if item is None else await self.teardown.close(item)

    # -- watching what the run deployed --------------------------------------------------------

    def watch(self, label: str, probe: Coroutine[Any, Any, str | None],
              sandbox: Sandbox | None = None) -> None:
        """End the run as an infra error as soon as ``probe`` returns why ``label`` went down
        (an env whose server exited mid-run, say), rather than when a step next trips on it.
        ``probe`` returns None to stop watching quietly. A report about ``sandbox`` after the
        run took that sandbox down itself (``teardown_sandboxes``) is not a failure."""
        self.watches[asyncio.ensure_future(probe)] = Watch(label, sandbox)

    def live_report(self, future: asyncio.Future[str | None]) -> str | None:
        """The failure a finished watch reports, or None (it stopped quietly, failed itself, or
        its sandbox is no longer the run's)."""
        watch = self.watches.pop(future)
        if future.cancelled() or future.exception() is not None:
            return None
        why = future.result()
        if not why or (watch.sandbox is not None and all(
                up is not watch.sandbox for up in self.sandboxes.values())):
            return None
        return f"{watch.label}: {why}"

    async def stop_watching(self) -> None:
        for future in self.watches:
            future.cancel()
        if self.watches:
            await asyncio.gather(*self.watches, return_exceptions=True)
        self.watches.clear()

    # -- envs, agents, teardown --------------------------------------------------------------

    def outside_agent(self, setup: AgentSetup) -> Agent | None:
        """Who plays ``setup.name`` from outside AgentEnv, or None: a deploying step asks first
        and deploys nothing when someone does (the episode API's trainers, see
        :mod:`agent_env.episodes`)."""
        return None

    def add_env(self, env_id: str, deployment: Any, *, close: Close | None = None) -> None:
        """Register a deployed env by id (``close`` takes it down at teardown).

        A deployment with a ``url`` (and ``token``) is also an :meth:`endpoint`.
        """
        self.envs[env_id] = deployment
        url = getattr(deployment, "url", None)
        if isinstance(url, str) and url:
            self.add_endpoint(f"env {env_id} gateway (MCP at /mcp)", url,
                              getattr(deployment, "token", None))
        if close is not None:
            self.on_teardown("env", f"env {env_id}", close)

    def add_endpoint(self, label: str, url: str, token: str | None = None) -> None:
        """An address this run serves while up; ``--keep`` prints it with its token. One entry
        per URL (envs deployed together share one gateway)."""
        if all(e.url != url for e in self.teardown.endpoints):
            self.teardown.endpoints.append(Endpoint(f"[{self.task_id}] {label}", url, token))

    def env(self, env_id: str) -> Any:
        """The deployment of ``env_id`` made by an earlier step."""
        try:
            return self.envs[env_id]
        except KeyError:
            self._left_behind("envs", env_id)
            up = ", ".join(sorted(self.envs)) or "none"
            raise StepError(f"env '{env_id}' is not deployed in this task (deployed: {up})") \
                from None

    def agent(self, name: str) -> Any:
        """The agent an earlier ``deploy_agent`` step brought up as ``name``."""
        try:
            return self.agents[name]
        except KeyError:
            self._left_behind("agents", name)
            up = ", ".join(sorted(self.agents)) or "none"
            raise StepError(f"agent '{name}' is not deployed in this task (deployed: {up}); "
                            "add a deploy_agent step before this one") from None

    def _left_behind(self, kind: str, name: str) -> None:
        from agent_env.tasks.resume import left_behind_problem

        problem = left_behind_problem(self.resume, kind, name)
        if problem is not None:
            raise StepError(problem)

    def on_teardown(self, kind: str, label: str, close: Close) -> TeardownItem:
        """Have the caller's teardown run ``close`` (newest first), whatever happens."""
        return self.teardown.register(kind, label, close)

    # -- artifacts ---------------------------------------------------------------------------

    async def artifact(self, artifact_id: str, version: int | None = None) -> ArtifactContent:
        """An artifact's files at ``version`` (a step's pinned ``*_version``), else at the
        version this run pinned, else the latest. The version loaded is recorded in the run's
        metadata (``artifact_versions``), so a run says what it ran with."""
        try:
            content = await self.artifacts.load(artifact_id, version)
        except LookupError as exc:
            raise StepError(str(exc).strip("'\"")) from None
        loaded = self.metadata.setdefault("artifact_versions", {})
        loaded.setdefault(artifact_id, [])
        if content.version not in loaded[artifact_id]:
            loaded[artifact_id].append(content.version)
        return content

    # -- verifications -------------------------------------------------------------------------

    def record_verification(
        self, step: Step, verifier_id: str | None, rows: Sequence[ScoreRow], aggregator: str,
        *, score: float | None = None,
    ) -> Verification:
        """Score ``rows`` and keep them as ``metadata.verifications[verifier_id]``; ``score``:
        the step's own score, when it computed one (a step written for the reference framework
        does), kept in place of the aggregate."""
        verification = Verification(
            verifier_id or step.id, step.id,
            aggregate(aggregator, rows) if score is None else score, tuple(rows)
        )
        self.verifications[verification.verifier_id] = verification
        return verification

    def forget_step(self, step_id: str) -> None:
        """Drop what a step recorded (its span is rolled back before a retry)."""
        self.outputs.pop(step_id, None)
        for key in [k for k, v in self.verifications.items() if v.step_id == step_id]:
            del self.verifications[key]

    # -- secrets and records -------------------------------------------------------------------

    def register_secret(self, value: str | None) -> None:
        """Never store ``value``: records show ``****`` in its place."""
        if value and len(value) >= 4:
            self._secrets.add(value)

    def strip_secrets(self, value: Any, key: str = "") -> Any:
        """A JSON-safe copy without secret-looking keys and with registered secrets masked;
        a number no store can hold (NaN, infinity) is its text."""
        if isinstance(value, dict):
            return {
                str(k): self.strip_secrets(v, str(k))
                for k, v in value.items()
                if not _SECRET_KEY.search(str(k))
            }
        if isinstance(value, list | tuple):
            return [self.strip_secrets(v, key) for v in value]
        if isinstance(value, str):
            for secret in self._secrets:
                value = value.replace(secret, REDACTED)
            return value
        if value is None or isinstance(value, bool | int | float):
            if unstorable_scalar(value) is not None:  # NaN, inf: kept as text, never stored raw
                return repr(value) if isinstance(value, float) else unstorable_scalar(value)
            return value
        return self.strip_secrets(_describe(value), key)

    def storage_problem(self) -> str | None:
        """What in this run's outputs and metadata no store could hold (NaN, infinity, too
        large: see :func:`agent_env.tasks.records.storage_problem`), or None. The engine asks
        after every step, so the step that made it fails, naming it."""
        return (storage_problem(self.outputs, "outputs")
                or storage_problem(self.metadata, "metadata")
                or storage_problem(self.snapshot(), "the run record's context"))

    def snapshot(self) -> dict[str, Any]:
        """What the instance record keeps of this context (secrets stripped)."""
        metadata = dict(self.metadata)
        metadata["verifications"] = {k: v.to_json() for k, v in self.verifications.items()}
        return self.strip_secrets({
            "metadata": metadata,
            "sandboxes": {n: s.describe() for n, s in self.sandboxes.items()},
            "envs": {n: _describe(e) for n, e in self.envs.items()},
            "agents": {n: _describe(a) for n, a in self.agents.items()},
            "outputs": self.outputs,
        })


def _describe(value: Any) -> Any:
    describe: Callable[[], Any] | None = getattr(value, "describe", None)
    if callable(describe):
        return describe()
    import attrs

    if attrs.has(type(value)):
        return attrs.asdict(value)
    return repr(value)
