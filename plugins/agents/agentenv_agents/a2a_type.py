"""The ``a2a`` agent type: an agent folder built into an image and run as an A2A server.

What one deployment is, inside the sandbox contract (any provider that runs containers):

* the sandbox: the one of the first env in ``env_ids`` (so the agent reaches that env at its
  ``internal_url``, with that deployment's bearer token: the env-type contract), or, with
  no env, a fresh VM-like sandbox of its own (``agent-<name>``, torn down with the run);
* the model gateway, container ``model-gateway`` (one per sandbox, its image built once from
  :mod:`agentenv_agents.gateway_server` and its modules): it serves the scripted model
  (``scripted:<name>``, scripts loaded by AgentEnv over an admin route) and, when ``[model]
  base_url`` is configured, forwards every other model to that upstream with ``[model] api_key``.
  Only that container holds the key. Its port is published so AgentEnv can load scripts and read
  the call records (``GET /calls``, admin token);
* the agent, container ``agent-<name>``, built from the agent folder (the folder plus the
  hermetic protocol wheel; content-hash tag), run with ``A2A_PORT=8000`` and a per-deployment
  bearer token ``A2A_TOKEN``. The agent is not published itself: its front, container
  ``agent-<name>-front`` (:mod:`agentenv_agents.agent_front`, from the model gateway's image),
  is, and checks that token on all but card and health whatever SDK the agent was built on.
  The agent gets ``AGENTENV_MODEL_BASE_URL=http://model-gateway:4000/v1``, a per-run model
  token (``AGENTENV_MODEL_TOKEN``) and ``AGENTENV_MODEL_NAME``; never a provider key. Once its
  card (``agent-card.json``, else ``agent.json``)
  answers, each env is added through ``/ext/mcp-config`` and role/system prompt through
  ``/ext/agent-config`` (when the card's agent-config takes them).

A prompt is ``message/send`` (non-blocking), then ``tasks/get`` every 0.2 s until a final
state; past ``timeout_seconds`` the task is cancelled and the step fails. A container that
stops answering mid-prompt fails the step within seconds, with its state and last log lines.
The reply's trajectory is read from ``/ext/trajectory``; the model calls of the prompt (from the
model gateway's records) and the agent's usage are appended as a last ``agentenv.usage`` event.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import secrets
import shutil
import time
import tomllib
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from agent_env.api import (
    AgentReply,
    InfraError,
    StepError,
    Usage,
    build_with_progress,
    cause,
    owned_scratch,
    side_by_side,
)

from .object_forms import card_extension, forget_staged, offers_objects
from .skill_config import give_skills
from .snapshots import (
    apply_changelog,
    changelog_problem,
    enable_changelog,
    load_snapshot,
    require_snapshots,
    save_snapshot,
)
from .snapshots import from_output as snapshot_objects
from .snapshots import stage_files as stage_snapshot
from .trajectory_objects import read_by_object

if TYPE_CHECKING:
    from agent_env.api import Sandbox, TaskContext

_log = logging.getLogger(__name__)
AGENT_PORT = 8000
MODEL_GATEWAY_PORT = 4000
MODEL_GATEWAY_CONTAINER = "model-gateway"
#: Where an agent in the sandbox reaches the model gateway (by its container's name).
PRIVATE_MODEL_BASE_URL = f"http://{MODEL_GATEWAY_CONTAINER}:{MODEL_GATEWAY_PORT}/v1"
MODEL_GATEWAY_IMAGE = "agentenv-model-gateway"
DEFAULT_READY_TIMEOUT = 120.0
POLL_INTERVAL = 0.2
#: A prompt's first ``tasks/get`` waits this long; each next wait is half as long again, up to
#: ``POLL_INTERVAL``. Why: a fixed 0.2 s made a quick answer (a scripted turn, a short task:
#: 40 ms of work) wait for the next poll, most of a lone prompt's 0.22 s; growing, it is seen
#: at 50 ms, and a long task still costs five polls a second.
FIRST_POLL = 0.02
#: Consecutive failed polls after which the agent counts as gone (then its state is checked).
DEAD_AFTER = 3
LOG_LINES = 30
SCRIPTED_PREFIX = "scripted:"
AGENT_LABEL = "agentenv.agent"
GATEWAY_MODULES = ("__init__.py", "model_gateway.py", "records.py", "scripted.py", "wire.py",
                   "gateway_server.py", "agent_front.py", "egress_proxy.py")
FINAL_STATES = frozenset({"completed", "failed", "canceled", "rejected", "input-required",
                          "auth-required"})

#: What the gateway modules import, installed at the versions this machine runs (so the image's
#: content hash changes when they do, and nothing else is pulled in).
GATEWAY_REQUIREMENTS = ("aiohttp", "attrs", "cattrs")
GATEWAY_DOCKERFILE = f"""\
FROM python:3.11-slim
RUN pip install --no-cache-dir --disable-pip-version-check {{requirements}} \\
 && useradd --create-home --uid 10001 gateway
WORKDIR /app
COPY agentenv_agents/ /app/agentenv_agents/
USER gateway
ENV PYTHONUNBUFFERED=1
EXPOSE {MODEL_GATEWAY_PORT}
CMD ["python", "-m", "agentenv_agents.gateway_server"]
"""


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9-]+", "-", name.lower()).strip("-") or "agent"


def write_gateway_context(folder: Path) -> Path:
    """The model gateway's build context: a Dockerfile and this package's gateway modules."""
    package = folder / "agentenv_agents"
    package.mkdir(parents=True, exist_ok=True)
    here = Path(__file__).parent
    for module in GATEWAY_MODULES:
        shutil.copyfile(here / module, package / module)
    from importlib.metadata import version

    pins = " ".join(f"{name}=={version(name)}" for name in GATEWAY_REQUIREMENTS)
    (folder / "Dockerfile").write_text(GATEWAY_DOCKERFILE.replace("{requirements}", pins),
                                       encoding="utf-8")
    return folder


# -- the model gateway of a sandbox --------------------------------------------------------


@attrs.define
class ModelGatewayHandle:
    """The ``model-gateway`` container of one sandbox, as AgentEnv reaches it."""

    url: str
    token: str = attrs.field(repr=False)
    admin_token: str = attrs.field(repr=False)
    image: str
    upstream: str | None
    loaded: set[str] = attrs.field(factory=set)
    lock: asyncio.Lock = attrs.field(factory=asyncio.Lock)

    @property
    def private_base_url(self) -> str:
        return PRIVATE_MODEL_BASE_URL

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.admin_token}"}

    async def add_caller(self, name: str, token: str, upstream_key: str | None = None) -> None:
        """Give one agent a model token of its own, so its calls are recorded as its own (and
        go upstream with ``upstream_key``, when given)."""
        import aiohttp

        caller = {"name": name, "token": token}
        if upstream_key:
            caller["upstream_key"] = upstream_key
        async with aiohttp.ClientSession() as http, http.post(
                f"{self.url}/admin/callers", json=caller,
                headers=self._headers(), timeout=aiohttp.ClientTimeout(total=30)) as resp:
            if resp.status != 200:
                raise InfraError(f"the model gateway refused a caller: HTTP {resp.status}")

    async def load_script(self, name: str, data: Any) -> str:
        import aiohttp

        async with aiohttp.ClientSession() as http, http.post(
                f"{self.url}/admin/scripts", json={"name": name, "script": data},
                headers=self._headers(), timeout=aiohttp.ClientTimeout(total=30)) as resp:
            body = await resp.json(content_type=None)
            if resp.status != 200:
                raise StepError(f"the model gateway refused the script '{name}': "
                                f"{(body or {}).get('error')}")
        self.loaded.add(name)
        return str(body["model"])

    async def _calls(self, after: int) -> dict[str, Any]:
        import aiohttp

        async with aiohttp.ClientSession() as http, http.get(
                f"{self.url}/calls", params={"after": str(after)}, headers=self._headers(),
                timeout=aiohttp.ClientTimeout(total=30)) as resp:
            body = await resp.json(content_type=None)
            if resp.status != 200 or not isinstance(body, dict):
                raise StepError(f"the model gateway's call records: HTTP {resp.status}")
        return body

    async def calls(self, after: int = 0) -> list[dict[str, Any]]:
        """The model calls recorded after the first ``after`` (every agent of the sandbox),
        page by page (the gateway answers a few MiB at a time)."""
        found: list[dict[str, Any]] = []
        while True:
            body = await self._calls(after + len(found))
            page = list(body.get("calls") or [])
            found += page
            if not page or after + len(found) >= int(body.get("count") or 0):
                return found

    async def count(self) -> int:
        """How many model calls the gateway has recorded."""
        return int((await self._calls(2**62)).get("count") or 0)


@attrs.frozen
class StartedGateway:
    """A model gateway whose container runs (its image and URL), maybe not answering yet."""

    url: str
    image: str


async def model_gateway(ctx: TaskContext, sandbox: Sandbox, say: Any) -> ModelGatewayHandle:
    """The sandbox's model gateway, started on first use and answering (once per sandbox and
    run: the handle lives in the run's plugin state, so agents of one sandbox share it)."""
    key = f"agents.model_gateway:{sandbox.id}"
    lock = ctx.state.setdefault(f"{key}:lock", asyncio.Lock())
    async with lock:
        if key in ctx.state:
            handle: ModelGatewayHandle = ctx.state[key]
            return handle
        from agent_env.api import model_settings, upstream_key

        settings = model_settings()
        # the run's --litellm-api-key over [model] api_key
        base_url = settings.base_url
        api_key = upstream_key(ctx.choices, "agent") or settings.api_key
        token, admin = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
        for secret in (token, admin, api_key, *settings.secret_header_values()):
            ctx.register_secret(secret)
        started = await _start_model_gateway(ctx, sandbox, say, token, admin, base_url, api_key,
                                             settings.headers)
        url = started.url
        await _wait_http(f"{url}/healthz", DEFAULT_READY_TIMEOUT, sandbox,
                         MODEL_GATEWAY_CONTAINER, "the model gateway")
        handle = ModelGatewayHandle(url, token, admin, started.image,
                                    upstream=str(base_url) if base_url else None)
        ctx.state[key] = handle
        ctx.add_endpoint(f"model gateway (OpenAI and Anthropic APIs) of sandbox {sandbox.id}",
                         f"{url}/v1", token)
        if ctx.model_endpoint is None:  # judges (rubrics_verifier) ask the run's first gateway
            judge = secrets.token_urlsafe(32)
            ctx.register_secret(judge)
            judge_key = _judge_key(ctx, api_key)
            await handle.add_caller("judge", judge, judge_key)
            ctx.model_endpoint = (f"{url}/v1", judge)
        await load_run_scripts(ctx, handle)
        return handle


async def model_gateway_image(ctx: TaskContext, sandbox: Sandbox,
                              gateway: asyncio.Future[ModelGatewayHandle]) -> str:
    """The image of ``gateway`` (a :func:`model_gateway` under way) once it is built or found,
    before its container starts. Raises what ``gateway`` raised if it failed first.

    Why: an agent's own containers need only the gateway's image (their front runs it) and
    its private address, so a deploy starts them beside the gateway's container instead of
    after it (issue 39). The sandbox's seal connects the gateway whenever it is created."""
    built = _built(ctx, sandbox)
    await asyncio.wait({built, gateway}, return_when=asyncio.FIRST_COMPLETED)
    if built.done():
        return built.result()
    return gateway.result().image  # raises what stopped it


async def _start_model_gateway(ctx: TaskContext, sandbox: Sandbox, say: Any, token: str,
                               admin: str, base_url: Any, api_key: Any,
                               headers: Any) -> StartedGateway:
    """Build (or find) the gateway's image, tell :func:`model_gateway_image`'s waiters, and
    start its container."""
    from agent_env.api import ContainerSpec

    with owned_scratch("agent-env-model-gateway-") as folder:  # gc finds it after kill -9
        write_gateway_context(folder)
        image = await build_with_progress(sandbox, str(folder), MODEL_GATEWAY_IMAGE,
                                          {"agentenv.role": "model-gateway"}, "model-gateway",
                                          say)
    if not (built := _built(ctx, sandbox)).done():
        built.set_result(image)
    env = {"AGENTENV_MODEL_TOKEN": token, "AGENTENV_MODEL_ADMIN_TOKEN": admin,
           "AGENTENV_MODEL_PORT": str(MODEL_GATEWAY_PORT)}
    if base_url:
        env["AGENTENV_UPSTREAM_BASE_URL"] = str(base_url)
        if api_key:
            env["AGENTENV_UPSTREAM_API_KEY"] = str(api_key)
        if headers:  # [model] headers, or the host's $LITELLM_EXTRA_HEADERS
            env["AGENTENV_UPSTREAM_HEADERS"] = json.dumps(headers)
    urls = await sandbox.run_container(ContainerSpec(
        name=MODEL_GATEWAY_CONTAINER, image=image, env=env, publish=(MODEL_GATEWAY_PORT,),
        labels={**ctx.labels, "agentenv.role": "model-gateway"}, private=False, egress=True))
    url = (urls.get(MODEL_GATEWAY_PORT) or "").rstrip("/")
    if not url:
        raise InfraError(f"the '{sandbox.provider_name}' sandbox published no URL for the "
                         f"model gateway's port {MODEL_GATEWAY_PORT}")
    return StartedGateway(url, image)


def _built(ctx: TaskContext, sandbox: Sandbox) -> asyncio.Future[str]:
    """The run's future of the sandbox's model gateway image (made by whoever asks first)."""
    future: asyncio.Future[str] = ctx.state.setdefault(
        f"agents.model_gateway:{sandbox.id}:image", asyncio.get_running_loop().create_future())
    return future


def _judge_key(ctx: TaskContext, run_key: str | None) -> str | None:
    """The upstream key judges' calls go with when the run chose one of its own
    (``--judge-litellm-api-key``), else None: the gateway's key then serves them too."""
    from agent_env.api import upstream_key

    key = upstream_key(ctx.choices, "judge")
    if key and key != run_key:
        ctx.register_secret(key)
        return key
    return None


def run_gateways(ctx: TaskContext) -> list[ModelGatewayHandle]:
    """The model gateways this run has started."""
    return [v for v in ctx.state.values() if isinstance(v, ModelGatewayHandle)]


#: Where a run keeps the scripts its ``scripted_model`` steps set up (``ctx.state``).
SCRIPTS_STATE = "agentenv_agents.scripts"


def run_scripts(ctx: TaskContext) -> dict[str, Any]:
    """Script name -> parsed script, for this run: what its ``scripted_model`` steps set up
    (run state, gone with the run)."""
    scripts: dict[str, Any] = ctx.state.setdefault(SCRIPTS_STATE, {})
    return scripts


async def load_run_scripts(ctx: TaskContext, handle: ModelGatewayHandle) -> None:
    """Load every scripted model this run has set up into ``handle`` (the ones it lacks).

    Agents load the script a prompt names on first use; a judge (``rubrics_verifier``, in the
    kernel) cannot, so every script is loaded up front, whichever came first, the gateway or
    the ``scripted_model`` step."""
    async with handle.lock:
        for name, data in list(run_scripts(ctx).items()):
            if name not in handle.loaded:
                await handle.load_script(name, data)


async def _container_state(sandbox: Sandbox, container: str) -> str:
    """``; container x: exited (1)`` and its last log lines (best effort, for errors)."""
    text = ""
    try:
        status = await sandbox.container_status(container)
        text = f"; container {container}: {status}" if status else ""
    except Exception:  # decoration for an error message
        pass
    try:
        logs = (await sandbox.container_logs(container, tail=LOG_LINES)).rstrip()
    except Exception as exc:
        logs = f"(could not read its logs: {exc})"
    return f"{text}\n--- last log lines of the {container} container ---\n{logs or '(no output)'}"


async def _read_card(url: str, sandbox: Sandbox, container: str, what: str) -> Any:
    """The agent's card once it serves one: ``agent-card.json`` (A2A 0.3's name), else the
    older ``agent.json`` that some SDKs still serve alone."""
    card = await _wait_http(f"{url}/.well-known/agent-card.json", DEFAULT_READY_TIMEOUT,
                            sandbox, container, what, accept_missing=True)
    if card is _MISSING:
        card = await _wait_http(f"{url}/.well-known/agent.json", DEFAULT_READY_TIMEOUT,
                                sandbox, container, what)
    return card


_MISSING = object()


async def _wait_http(url: str, timeout: float, sandbox: Sandbox, container: str,
                     what: str, *, accept_missing: bool = False) -> Any:
    """GET ``url`` until it answers 200 (its JSON body, or None); InfraError with logs after."""
    import aiohttp

    deadline = time.monotonic() + timeout
    delay = 0.02
    last = "no answer"
    checked = time.monotonic()
    async with aiohttp.ClientSession() as http:
        while True:
            try:
                async with http.get(url, timeout=aiohttp.ClientTimeout(total=3)) as resp:
                    if resp.status == 200:
                        try:
                            return await resp.json(content_type=None)
                        except ValueError:
                            return None
                    if resp.status == 404 and accept_missing:
                        return _MISSING
                    last = f"HTTP {resp.status}"
            except (TimeoutError, aiohttp.ClientError) as exc:
                last = cause(exc)
            now = time.monotonic()
            if now - checked > 1.0:
                checked = now
                try:
                    status = await sandbox.container_status(container)
                except Exception:
                    status = None
                if status not in (None, "running"):
                    raise InfraError(f"{what} stopped before it was ready"
                                     f"{await _container_state(sandbox, container)}")
            if now > deadline:
                raise InfraError(f"{what} was not ready within {timeout:.0f}s ({last})"
                                 f"{await _container_state(sandbox, container)}")
            await asyncio.sleep(delay)
            delay = min(delay * 1.5, POLL_INTERVAL)


# -- the agent -----------------------------------------------------------------------------


def _supported_config(card: dict[str, Any]) -> set[str]:
    """The fields the card's agent-config ``set`` accepts (empty: no agent-config)."""
    methods = ((card_extension(card, "agent-config") or {}).get("params") or {}).get(
        "methods") or {}
    for method in methods.values():
        request = (method or {}).get("request") or {}
        if isinstance(request, dict) and "supported" in request:
            return set(request["supported"])
    return set()


def _has_extension(card: dict[str, Any], name: str) -> bool:
    return card_extension(card, name) is not None


@attrs.define
class A2aAgent:
    """A deployed A2A agent, as the prompt steps see it."""

    name: str
    agent_id: str
    url: str
    container: str
    image: str
    model: str | None
    card: dict[str, Any]
    sandbox: Any = attrs.field(repr=False)
    gateway: ModelGatewayHandle = attrs.field(repr=False)
    ctx: Any = attrs.field(repr=False)
    env_ids: list[str] = attrs.field(factory=list)
    context_id: str = attrs.field(factory=lambda: uuid.uuid4().hex)
    #: The bearer token its A2A server wants (``A2A_TOKEN``): its port is published on the host.
    token: str = attrs.field(factory=lambda: secrets.token_urlsafe(32), repr=False)
    #: ``sealed``: its container reaches only the sandbox's gateways; ``allowlist``: also the
    #: hosts and CIDRs of ``allowed``, through its egress proxy; ``open``: also the world.
    network_policy: str = "sealed"
    allowed: tuple[str, ...] = ()
    #: Where its changelog goes, once ``enable_changelog`` turned it on (checked per prompt).
    changelog: str | None = None
    #: Its name at the model gateway, which tells its calls apart: its container's, unless
    #: ``install_agent`` put it in a task's container that may hold others.
    caller: str = ""
    #: Where agents of its sandbox reach its A2A server (peer-agents/v1): its front's address.
    peer_url: str = ""

    def __attrs_post_init__(self) -> None:
        self.caller = self.caller or self.container
        self.peer_url = self.peer_url or f"http://{self.container}-front:{AGENT_PORT}"

    @property
    def rpc_path(self) -> str:
        """Where its JSON-RPC is served: the path of the card's ``url`` (``/a2a`` by default)."""
        from urllib.parse import urlparse

        return urlparse(str(self.card.get("url") or "")).path or "/a2a"

    @property
    def auth_headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    def describe(self) -> dict[str, Any]:
        return {"agent_name": self.name, "type": "a2a", "agent": self.agent_id,
                "image": self.image, "url": self.url, "container": self.container,
                "model": self.model, "model_gateway": {
                    "image": self.gateway.image,
                    "upstream": self.gateway.upstream or "scripted only"},
                "card_name": self.card.get("name"), "card_version": self.card.get("version"),
                "envs": list(self.env_ids), "network_policy": self.network_policy,
                **({"allowed": list(self.allowed)} if self.network_policy == "allowlist"
                   else {}),
                "sandbox": self.sandbox.describe() if self.sandbox is not None else None}

    async def give_skills(self, entries: list[dict[str, Any]],
                          versions: dict[str, int] | None = None) -> list[str]:
        """``add_skills``: ``entries`` (skill-config entries: inline ``skill_md`` or a stored
        ``artifact_id``, at ``versions`` where given) sent to this agent; the names it took."""
        import aiohttp

        from agent_env.api import current

        async def load(artifact_id: str) -> dict[str, bytes]:
            content = await self.ctx.artifact(artifact_id, (versions or {}).get(artifact_id))
            return {item.path: item.data for item in content.files}

        async with aiohttp.ClientSession(headers=self.auth_headers) as http:
            return await give_skills(http, self.url, self.name, self.card, entries, load=load,
                                     post=post_ok, store=current().store("object"),
                                     open_agent=self.network_policy == "open",
                                     staging_prefix=f"staging/agent-skills/{self.container}")

    async def put_file(self, path: str, data: bytes, *, mode: int = 0o644) -> None:
        """``load_artifact`` into this agent: the file goes into its container."""
        from agent_env.api import SandboxUnsupported, StepError

        try:
            await self.sandbox.put_container_file(self.container, path, data, mode=mode)
        except SandboxUnsupported as exc:
            raise StepError(f"agent '{self.name}': {exc}") from None

    async def save_snapshot(self, step: Any, prefix: str) -> dict[str, Any]:
        """``snapshot_agent_state``: the conversation (and workspace) saved under ``prefix``
        through snapshot/v1 (see :mod:`.snapshots`); what the step records."""
        import aiohttp

        from agent_env.api import current

        async with aiohttp.ClientSession(headers=self.auth_headers) as http:
            saved = await save_snapshot(
                http, self.url, self.name, self.card, context_id=step.context_id or
                self.context_id, workspace=bool(step.include_workspace),
                store=current().store("object"), prefix=prefix,
                open_agent=self.network_policy == "open")
        return saved.to_output()

    async def load_snapshot(self, step: Any) -> str:
        """``deploy_agent``'s ``agent_snapshot_*``: load the snapshot a step saved, or a stored
        files artifact, and continue this agent's conversation in the loaded context."""
        import aiohttp

        from agent_env.api import current

        open_agent = self.network_policy == "open"
        require_snapshots(self.card, self.name, open_agent, "load a snapshot")  # before staging
        store = current().store("object")
        staged: list[str] = []
        try:
            if step.agent_snapshot_step:
                output = self.ctx.outputs.get(step.agent_snapshot_step)
                if output is None:
                    raise StepError(f"agent_snapshot_step '{step.agent_snapshot_step}' saved "
                                    "nothing (no such step ran before this one)")
                objects = snapshot_objects(output, step.agent_snapshot_step)
            else:
                artifact_id = step.agent_snapshot_files_artifact_id
                content = await self.ctx.artifact(
                    artifact_id, step.pinned("agent_snapshot_files_artifact_id"))
                files = {item.path: item.data for item in content.files}
                objects = await asyncio.to_thread(  # store calls block: not on the loop
                    stage_snapshot, files, store, f"staging/agent-snapshots/{self.container}",
                    staged, artifact_id)
            async with aiohttp.ClientSession(headers=self.auth_headers) as http:
                self.context_id = await load_snapshot(
                    http, self.url, self.name, self.card, objects=objects,
                    target_context_id=step.agent_snapshot_target_context_id, store=store,
                    open_agent=open_agent)
        finally:
            await asyncio.to_thread(forget_staged, store, staged)
        return self.context_id

    async def enable_changelog(self, step: Any, prefix: str) -> list[str]:
        """``deploy_agent``'s ``enable_agent_changelog``: the agent logs under ``prefix``;
        each prompt then checks the log still goes (see :mod:`.snapshots`)."""
        import aiohttp

        from agent_env.api import current

        async with aiohttp.ClientSession(headers=self.auth_headers) as http:
            roots = await enable_changelog(
                http, self.url, self.name, self.card, store=current().store("object"),
                prefix=prefix, open_agent=self.network_policy == "open")
        self.changelog = prefix
        return roots

    async def apply_changelog(self, step: Any, prefix: str) -> dict[str, Any]:
        """``deploy_agent``'s ``agent_changelog_object_url``: the increments under ``prefix``
        replayed, the conversation continued from them; what the step records."""
        import aiohttp

        from agent_env.api import current

        async with aiohttp.ClientSession(headers=self.auth_headers) as http:
            count, self.context_id = await apply_changelog(
                http, self.url, self.name, self.card, store=current().store("object"),
                prefix=prefix, before=step.agent_changelog_toolcall_position_exclusive,
                target_context_id=step.agent_snapshot_target_context_id,
                open_agent=self.network_policy == "open")
        return {"prefix": prefix, "increments": count, "context_id": self.context_id}

    async def _rpc(self, http: Any, method: str, params: dict[str, Any],
                   timeout: float = 30) -> dict[str, Any]:
        import aiohttp

        body = {"jsonrpc": "2.0", "id": uuid.uuid4().hex, "method": method, "params": params}
        async with http.post(f"{self.url}{self.rpc_path}", json=body,
                             timeout=aiohttp.ClientTimeout(total=timeout)) as resp:
            if resp.status in (502, 503, 504):  # the front: the agent behind it does not answer
                raise aiohttp.ClientResponseError(resp.request_info, resp.history,
                                                  status=resp.status, message=await resp.text())
            reply = await resp.json(content_type=None)
        if not isinstance(reply, dict):
            raise StepError(f"agent '{self.name}': {method} answered {reply!r}")
        if reply.get("error"):
            raise StepError(f"agent '{self.name}': {method} failed: {reply['error']}")
        return dict(reply.get("result") or {})

    async def _dead(self) -> str | None:
        """Why the agent's container is gone, or None if it still runs."""
        try:
            status = await self.sandbox.container_status(self.container)
        except Exception:
            status = None
        if status in (None, "running"):  # running, or the sandbox cannot tell
            return None
        return await _container_state(self.sandbox, self.container)

    async def _resolve_model(self, step: Any) -> str | None:
        model = step.model or self.model
        if model and model.startswith(SCRIPTED_PREFIX):
            name = model[len(SCRIPTED_PREFIX):]
            async with self.gateway.lock:
                if name not in self.gateway.loaded:
                    data = await load_script(self.ctx, name, self.env_ids)
                    await self.gateway.load_script(name, data)
        return model

    async def prompt(self, step: Any, timeout: float) -> AgentReply:
        import aiohttp

        model = await self._resolve_model(step)
        supported = _supported_config(self.card)
        takes = ", ".join(sorted(supported)) or "nothing"
        config = step.agent_config()  # what the step sets; never silently dropped
        refused = sorted(key for key in config if key not in supported)
        if refused:
            raise StepError(f"agent '{self.name}' cannot take {', '.join(refused)} (its "
                            f"agent-config supports: {takes})")
        if model and "model" in supported:
            config["model"] = model  # the agent's default model, or the scripted one loaded
        context_id = step.context_id or self.context_id
        fixed = step.poll_interval_seconds  # the step's own interval, else growing waits
        poll = fixed or FIRST_POLL
        deadline = time.monotonic() + timeout
        calls_before = await self.gateway.count()
        async with aiohttp.ClientSession(headers=self.auth_headers) as http:
            try:
                if config:
                    await post_ok(http, f"{self.url}/ext/agent-config", config, self.name)
                message = {"messageId": uuid.uuid4().hex, "role": "user",
                           "parts": list(step.parts or [{"kind": "text", "text": step.prompt}]),
                           "contextId": context_id}
                task = await self._rpc(http, "message/send", {
                    "message": message, "configuration": {"blocking": False}})
            except (aiohttp.ClientError, TimeoutError) as exc:
                why = await self._dead()
                raise InfraError(f"agent '{self.name}' did not take the prompt "
                                 f"({cause(exc)}){why or ''}") from None
            task_id = str(task.get("id") or "")
            if not task_id:
                raise StepError(f"agent '{self.name}': message/send returned no task: {task}")
            failures = 0
            while (task.get("status") or {}).get("state") not in FINAL_STATES:
                if time.monotonic() > deadline:
                    try:
                        await self._rpc(http, "tasks/cancel", {"id": task_id}, timeout=5)
                    except Exception:  # the step fails anyway
                        pass
                    raise StepError(f"agent '{self.name}' did not answer within {timeout:g}s "
                                    f"(task {task_id} cancelled)")
                await asyncio.sleep(poll)
                if not fixed:
                    poll = min(poll * 1.5, POLL_INTERVAL)
                try:
                    task = await self._rpc(http, "tasks/get", {"id": task_id}, timeout=10)
                    failures = 0
                except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
                    failures += 1
                    why = await self._dead()
                    if why is not None or failures >= DEAD_AFTER:
                        raise InfraError(
                            f"agent '{self.name}' stopped answering mid-prompt "
                            f"({cause(exc)}){why or ''}") from None
            trajectory = await self._trajectory(http, task_id)
            if self.changelog is not None:
                stopped = await changelog_problem(http, self.url)
                if stopped is not None:
                    raise StepError(f"agent '{self.name}': {stopped} (increments so far are "
                                    f"under '{self.changelog}')")
        return await self._reply(task, trajectory, calls_before, model)

    async def _trajectory(self, http: Any, task_id: str) -> list[dict[str, Any]]:
        """The task's events, read page by page (a page carries the format); the first event
        is ``{"type": "agentenv.format", "format": ...}`` when the agent names one."""
        if not _has_extension(self.card, "trajectory"):
            return []
        import aiohttp

        events: list[Any] = []
        fmt = None
        after = 0
        if self.network_policy == "open" and offers_objects(self.card, "trajectory",
                                                            "trajectory"):
            from agent_env.api import current

            uploaded, why = await read_by_object(http, self.url, task_id,
                                                 current().store("object"),
                                                 f"staging/agent-trajectories/{self.container}")
            if uploaded is not None:
                events, after = uploaded, len(uploaded)  # a cursor read there: the format
            else:
                _log.warning("agent %s: trajectory read inline (object form refused: %s)",
                             self.name, why)
        try:
            for _ in range(10_000):
                async with http.post(f"{self.url}/ext/trajectory",
                                     json={"task_id": task_id, "after": after, "limit": 1000},
                                     timeout=aiohttp.ClientTimeout(total=30)) as resp:
                    page = await resp.json(content_type=None)
                if resp.status != 200 or not isinstance(page, dict):
                    return [{"type": "agentenv.trajectory_error",
                             "message": f"HTTP {resp.status}: {str(page)[:300]}"}]
                fmt = page.get("format") or fmt
                events.extend(page.get("events") or [])
                after = int(page.get("next") or after)
                if not page.get("has_more"):
                    break
        except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
            return [{"type": "agentenv.trajectory_error", "message": str(exc)}]
        out = [e if isinstance(e, dict) else {"event": e} for e in events]
        if fmt:
            out.insert(0, {"type": "agentenv.format", "format": fmt})
        return out

    async def _reply(self, task: dict[str, Any], trajectory: list[dict[str, Any]],
                     calls_before: int, model: str | None) -> AgentReply:
        status = task.get("status") or {}
        state = status.get("state")
        parts = ((status.get("message") or {}).get("parts")) or []
        texts = [p.get("text", "") for p in parts if p.get("kind") == "text"]
        data = {}
        for part in parts:
            if part.get("kind") == "data" and isinstance(part.get("data"), dict):
                data.update(part["data"])
        text = texts[-1] if texts else ""
        # only this agent's calls: agents sharing the gateway each call with a token of their own
        calls = [c for c in await self.gateway.calls(calls_before)
                 if c.get("caller") == self.caller]
        models = sorted({str(c.get("model")) for c in calls if c.get("model")})
        reported = data.get("usage") or {}
        # The gateway's counts when the agent used it; what the agent says, when it did not.
        usage = Usage(
            tool_calls=int(reported.get("tool_call_count") or 0),
            model_calls=len(calls),
            input_tokens=(sum(c.get("input_tokens") or 0 for c in calls) if calls
                          else int(reported.get("input_tokens") or 0)),
            output_tokens=(sum(c.get("output_tokens") or 0 for c in calls) if calls
                           else int(reported.get("output_tokens") or 0)),
            cost_usd=reported.get("cost_usd"),
        )
        usage_event = {
            "type": "agentenv.usage", "state": state, "model": model,
            "models_answering": models, "usage": attrs.asdict(usage),
            "agent_reported": {k: reported.get(k) for k in
                               ("input_tokens", "output_tokens", "cost_usd")},
            "model_calls": [{
                "api": c.get("api"), "model": c.get("model"),
                "requested_model": c.get("requested_model"), "status": c.get("status"),
                "usage": {"input": c.get("input_tokens"), "output": c.get("output_tokens")},
                "latency_ms": c.get("latency_ms"), "error": c.get("error")} for c in calls],
        }
        self.ctx.note(f"agents/{self.agent_id}: '{self.name}' answered ({state}) with model "
                      f"{', '.join(models) or model or 'none'}: {len(calls)} model call(s), "
                      f"{usage.input_tokens} input + {usage.output_tokens} output tokens, "
                      f"{usage.tool_calls} tool call(s)")
        error_type = error_message = None
        if data.get("error_type") or state in ("failed", "rejected", "canceled"):
            error_type = str(data.get("error_type") or "agent_error")
            error_message = (f"{data.get('error_code') or state}: "
                             f"{data.get('error_message') or text}")
            upstream = _upstream_failure(calls)
            if upstream is not None:  # the model could not be reached: not the agent's doing
                error_type, error_message = "infra_error", f"{upstream}; agent said {error_message}"
        return AgentReply(text, (*trajectory, usage_event), usage, error_type, error_message,
                          models[-1] if models else model, task.get("contextId"), tuple(calls))


def _upstream_failure(calls: list[dict[str, Any]]) -> str | None:
    """``model upstream answered HTTP 429 ...`` when the prompt's last model call failed on the
    upstream's side (unreachable, refused the key, rate-limited, 5xx), else None."""
    if not calls:
        return None
    last = calls[-1]
    status = int(last.get("status") or 0)
    if status in (401, 403, 429) or status >= 500:
        detail = f": {last.get('error')}" if last.get("error") else ""
        return f"the model upstream answered HTTP {status} for model {last.get('model')}{detail}"
    return None


async def post_ok(http: Any, url: str, body: dict[str, Any], name: str, *,
                  timeout: float = 30) -> dict[str, Any]:
    """POST ``body``; the JSON answer, or StepError naming the agent and the refusal."""
    import aiohttp

    async with http.post(url, json=body, timeout=aiohttp.ClientTimeout(total=timeout)) as resp:
        text = await resp.text()
        if resp.status >= 300:
            raise StepError(f"agent '{name}': POST {url} answered HTTP {resp.status}: "
                            f"{text[:300]}")
    try:
        return dict(json.loads(text) or {})
    except (ValueError, TypeError):
        return {}


async def load_script(ctx: TaskContext, name: str, env_ids: list[str]) -> Any:
    """The scripted model's script ``name``: what a ``scripted_model`` step of this run set up,
    else a stored artifact of that id."""
    found = run_scripts(ctx).get(name)
    if found is not None:
        return found
    try:
        artifact = await ctx.artifact(name)
    except Exception:
        raise StepError(
            f"no scripted model '{name}' is set up in this task: add a step "
            f'{{"type": "scripted_model", "script_artifact_id": "{name}"}} before the prompt '
            "(the artifact holds the script)") from None
    return parse_script(artifact, name)


def parse_script(artifact: Any, name: str) -> Any:
    """The one ``.json`` or ``.toml`` script file of ``artifact``, parsed."""
    files = [f for f in artifact.files if f.path.endswith((".json", ".toml"))]
    if len(files) != 1:
        raise StepError(f"scripted model '{name}': artifact {artifact.id} must hold exactly one "
                        f".json or .toml script (holds {[f.path for f in artifact.files]})")
    file = files[0]
    try:
        text = file.data.decode("utf-8")
        data = tomllib.loads(text) if file.path.endswith(".toml") else json.loads(text)
    except (UnicodeDecodeError, ValueError) as exc:
        raise StepError(f"scripted model '{name}': {file.path} is not valid: {exc}") from None
    if not isinstance(data, dict) or not data.get("turns"):
        raise StepError(f"scripted model '{name}': {file.path} is not a script (an object "
                        "with 'turns')")
    return data


def build_context(source: Any, folder: Path) -> Path:
    """Agent folder ``source`` as its build context, under ``folder``: what is built, and what
    ``a2a-agent list`` hashes to tell whether it was."""
    context = folder / source.name
    shutil.copytree(source.folder, context, ignore=shutil.ignore_patterns(
        "__pycache__", "*.pyc", ".git"))
    if source.dockerfile != "Dockerfile":
        shutil.copyfile(context / source.dockerfile, context / "Dockerfile")
    return context


async def agent_image(sandbox: Sandbox, source: Any, say: Any) -> str:
    """The image of agent folder ``source``: the one it names, else built (content-hash tag)."""
    if source.image:
        say(f"agents/{source.name}: image {source.image} (given)")
        return str(source.image)
    with owned_scratch("agent-env-agent-") as folder:  # gc finds it after kill -9
        context = build_context(source, folder)
        return await build_with_progress(sandbox, str(context), source.name,
                                         {AGENT_LABEL: source.name}, f"agents/{source.name}",
                                         say)


def agent_environment(source: Any, extra: dict[str, str], *, port: int, token: str,
                      model_base_url: str, model_token: str, model: str | None,
                      role: str | None) -> dict[str, str]:
    """What an A2A agent AgentEnv starts finds in its environment: its folder's
    ``default_env_vars``, then ``extra``, then what AgentEnv sets (its port and bearer token,
    the model gateway's URL and its own model token, the model, ``max_turns``, its role)."""
    env = {**source.default_env_vars, **extra, "A2A_PORT": str(port), "A2A_TOKEN": token,
           "AGENTENV_MODEL_BASE_URL": model_base_url,
           "AGENTENV_MODEL_TOKEN": model_token}
    if model:
        env["AGENTENV_MODEL_NAME"] = str(model)
    if "max_turns" in source.config:
        env["AGENTENV_MAX_TURNS"] = str(source.config["max_turns"])
    if role:
        env["AGENT_ENV_ROLE"] = role
    return env


def agent_model(ctx: TaskContext, source: Any) -> str | None:
    """The run's ``--model``, else ``[model]`` roles.agent or default, else the folder's."""
    from agent_env.api import model_settings

    return (ctx.choices.model or model_settings().model_for("agent")
            or source.metadata.get("default_model") or None)


class A2aAgentType:
    """Deploys agent folders whose ``agent.toml`` says ``type = "a2a"``."""

    name = "a2a"

    @staticmethod
    async def deploy(ctx: TaskContext, step: Any, setup: Any, source: Any) -> A2aAgent:
        from agent_env.api import ContainerSpec, SandboxSpec, create_in_chain

        def say(line: str) -> None:
            ctx.note(line)

        envs = dict(setup.envs)
        container = f"agent-{_slug(step.agent_name)}"  # also its own sandbox's name
        sandbox = None
        if step.env_ids:
            sandbox = envs[step.env_ids[0]].sandbox
            if sandbox is None:
                raise StepError(f"env '{step.env_ids[0]}' was not deployed in a sandbox an "
                                "agent can join")
        else:
            sized = {k: v for k, v in (("cpu", step.cpu), ("memory_mb", step.memory_mb))
                     if v is not None}
            spec = SandboxSpec(name=container, mode="vm", ttl_seconds=step.ttl_seconds or 3 * 3600,
                               labels={**ctx.labels, "agentenv.step": step.id}, **sized)
            chain = ctx.provider_chain(step.sandbox_type, role="agent")
            chain = list(dict.fromkeys("docker" if p == "local" else p for p in chain))
            sandbox, passed_over = await create_in_chain(chain, spec, note=ctx.note)
            ctx.add_sandbox(container, sandbox, passed_over)
        policy = getattr(step, "network_policy", None) or "sealed"
        if policy != "open" and (reason := sandbox.agent_isolation()) is not None:
            raise StepError(f"agent '{step.agent_name}' cannot be sealed: {reason}; set "
                            'network_policy = "open" on its deploy_agent step to give it a '
                            "route out")
        reserved = sorted(k for k in step.env_vars
                          if k.startswith(("A2A_", "AGENTENV_MODEL_")))
        if reserved:
            raise StepError(f"env_vars may not set {', '.join(reserved)}: AgentEnv sets them")
        # The gateway comes up (its container, /healthz, judge caller, scripts) while the
        # agent's own containers start: they need only its image and private address.
        coming = asyncio.ensure_future(model_gateway(ctx, sandbox, say))
        try:
            image = await agent_image(sandbox, source, say)
            gateway_image = await model_gateway_image(ctx, sandbox, coming)
            model = agent_model(ctx, source)
            token, model_token = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
            ctx.register_secret(token)
            ctx.register_secret(model_token)
            env = agent_environment(source, step.env_vars, port=AGENT_PORT, token=token,
                                    model_base_url=PRIVATE_MODEL_BASE_URL,
                                    model_token=model_token, model=model, role=setup.role)
            labels = {**ctx.labels, AGENT_LABEL: source.name}
            allowed: tuple[str, ...] = ()
            if policy == "allowlist":
                allowed = (*step.allow_hosts, *step.allow_cidrs)
                env.update(await _egress_proxy(ctx, sandbox, container, gateway_image, step,
                                               envs, labels))
                say(f"agents/{source.name}: '{step.agent_name}' may also reach "
                    f"{', '.join(allowed)} (through its egress proxy)")
            # sealed: on a network whose only other members are the gateways and agent fronts.
            # Only the front is published: it checks the token whatever SDK the agent was
            # built on. It finds the agent by name, so the two start side by side.
            _, urls = await side_by_side(
                sandbox.run_container(ContainerSpec(
                    name=container, image=image, env=env,
                    labels={**labels, "agentenv.role": "agent"}, private=False,
                    sealed=policy != "open")),
                sandbox.run_container(ContainerSpec(
                    name=f"{container}-front", image=gateway_image,
                    command=("python", "-m", "agentenv_agents.agent_front"),
                    env={"AGENTENV_FRONT_TARGET": f"http://{container}:{AGENT_PORT}",
                         "AGENTENV_FRONT_TOKEN": token, "AGENTENV_FRONT_PORT": str(AGENT_PORT)},
                    publish=(AGENT_PORT,), labels={**labels, "agentenv.role": "agent-front"},
                    private=False)))
            gateway = await coming
        except BaseException:
            if not coming.done():
                coming.cancel()
            await asyncio.wait({coming})
            if not coming.cancelled():
                coming.exception()  # retrieved: what the step hears is the first failure
            raise
        # an agent deployed as a rubric's judge asks with the judges' key
        from agent_env.api import JUDGE_ROLE, upstream_key

        judge_key = _judge_key(ctx, upstream_key(ctx.choices, "agent")) \
            if setup.role == JUDGE_ROLE else None
        await gateway.add_caller(container, model_token, judge_key)
        url = (urls.get(AGENT_PORT) or "").rstrip("/")
        if not url:
            raise InfraError(f"the '{sandbox.provider_name}' sandbox published no URL for "
                             f"agent '{step.agent_name}' (port {AGENT_PORT})")
        card = await _read_card(url, sandbox, container,
                                f"agent '{step.agent_name}' ({source.name})")
        if not isinstance(card, dict):
            raise StepError(f"agent '{step.agent_name}' ({source.name}) serves no JSON card")
        agent = A2aAgent(step.agent_name, source.name, url, container, image, model, card,
                         sandbox, gateway, ctx, list(step.env_ids), token=token,
                         network_policy=policy, allowed=allowed)
        await _configure(agent, card, setup, envs, step)
        ctx.add_endpoint(f"agent '{step.agent_name}' ({source.name}), A2A", url, token)
        say(f"agents/{source.name}: '{step.agent_name}' ready at {url} "
            f"({policy} network; model {model or 'named per prompt'}; model gateway "
            f"{'forwarding to the configured upstream' if gateway.upstream else 'scripted only'})")
        return agent


EGRESS_PORT = 3128


async def _egress_proxy(ctx: TaskContext, sandbox: Any, container: str,
                        gateway_image: str, step: Any, envs: dict[str, Any],
                        labels: dict[str, str]) -> dict[str, str]:
    """Start the egress proxy of an ``allowlist`` agent; the variables that point the agent's
    HTTP clients at it (and its gateways past it: they are on its sealed network)."""
    from urllib.parse import urlsplit

    from agent_env.api import ContainerSpec

    token = secrets.token_urlsafe(24)
    ctx.register_secret(token)
    name = f"{container}-egress"
    # an edge container with a route out that sealed containers reach (sealed_peer)
    await sandbox.run_container(ContainerSpec(
        name=name, image=gateway_image, command=("python", "-m", "agentenv_agents.egress_proxy"),
        env={"AGENTENV_EGRESS_TOKEN": token, "AGENTENV_EGRESS_PORT": str(EGRESS_PORT),
             "AGENTENV_EGRESS_HOSTS": ",".join(step.allow_hosts),
             "AGENTENV_EGRESS_CIDRS": ",".join(step.allow_cidrs)},
        labels={**labels, "agentenv.role": "agent-egress"}, private=False, egress=True,
        sealed_peer=True, memory_mb=64))
    direct = ["localhost", "127.0.0.1", "::1", urlsplit(PRIVATE_MODEL_BASE_URL).hostname]
    direct += [urlsplit(str(d.internal_url)).hostname for d in envs.values()]
    proxy = f"http://agentenv:{token}@{name}:{EGRESS_PORT}"
    bypass = ",".join(dict.fromkeys(h for h in direct if h))
    return {"HTTP_PROXY": proxy, "HTTPS_PROXY": proxy, "http_proxy": proxy,
            "https_proxy": proxy, "NO_PROXY": bypass, "no_proxy": bypass,
            "NODE_USE_ENV_PROXY": "1"}


async def _configure(agent: A2aAgent, card: dict[str, Any], setup: Any,
                     envs: dict[str, Any], step: Any) -> None:
    import aiohttp

    async with aiohttp.ClientSession(headers=agent.auth_headers) as http:
        if envs:
            if not _has_extension(card, "mcp-config"):
                raise StepError(f"agent '{agent.name}' takes no MCP servers (its card has no "
                                "mcp-config extension), but the step gives it envs")
            first = envs[step.env_ids[0]].sandbox
            added: set[int] = set()  # envs deployed together share one gateway: added once
            for env_id, deployment in envs.items():
                if deployment.sandbox is not first:
                    raise StepError(f"agent '{agent.name}': env '{env_id}' runs in another "
                                    "sandbox than the first env's; an agent reaches the envs "
                                    "of one sandbox (deploy them together with with_envs)")
                if id(deployment) in added:
                    continue
                added.add(id(deployment))
                headers = dict(deployment.headers)
                if setup.role:
                    headers["AgentEnv-Role"] = setup.role
                name = _slug(deployment.environment_name or env_id.rsplit("/", 1)[-1])
                await post_ok(http, f"{agent.url}/ext/mcp-config", {
                    "url": f"{deployment.internal_url}/mcp",
                    "headers": headers, "name": name}, agent.name)
        supported = _supported_config(card)
        config: dict[str, Any] = {}
        wanted = {"role": setup.role, "system_prompt": setup.system_prompt}
        for key, value in wanted.items():
            if value is None or (key == "role" and envs and key not in supported):
                continue  # the role also went to every env, as the AgentEnv-Role header
            if key not in supported:
                raise StepError(f"agent '{agent.name}' cannot take a {key} (its agent-config "
                                f"supports: {', '.join(sorted(supported)) or 'nothing'})")
            config[key] = value
        if config:
            await post_ok(http, f"{agent.url}/ext/agent-config", config, agent.name)
        if getattr(step, "skills", None):
            await agent.give_skills(list(step.skills))
