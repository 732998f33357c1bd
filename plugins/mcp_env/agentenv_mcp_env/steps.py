"""mcp_env's step types: verify a deployed MCP env from a script, reset it, protocol checks.

(``deploy_env`` is the kernel's: it hands an ``mcp_server`` env to :class:`.McpServerEnv`.)
* ``env_outcome_verifier``: loads a file artifact's ``verify.py`` and awaits its
  ``verify(mcp_url)`` in this process (the official ``mcp`` client is a dependency of this
  plugin, so the scripts' imports resolve, and a script written for mcp 1.x runs on 2.x too: see
  :mod:`.mcp_compat`); the URL carries the token, so a script that opens a stock MCP client on
  it with no headers gets through. Rows ``[{id, result, description}]``. When the script fails
  (raises, or a row fails), the deployment is checked: an env that went down mid-run fails the
  step with that reason, its container's state and last log lines, not as a wrong answer.
* ``reset_env``: ``data/reset`` through the gateway's data plane.
* ``verify_env_card`` / ``verify_env_core_protocol``: protocol checks recorded as score rows.
"""

from __future__ import annotations

import asyncio
import importlib.util
import inspect
import re
import sys
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from agent_env.api import AGGREGATORS, InfraError, PreflightView, ScoreRow, Step, StepError
from agentenv_mcp_env.deployment import (
    GatewayDeployment,
)

if TYPE_CHECKING:
    from collections.abc import Iterable

    from agent_env.api import TaskContext

DEFAULT_VERIFY_TIMEOUT = 300.0


def _aggregator_problems(name: str) -> list[str]:
    if name in AGGREGATORS:
        return []
    return [f"score_aggregator '{name}' is not known (known: {', '.join(AGGREGATORS)})"]


def deployment(ctx: TaskContext, env_id: str) -> GatewayDeployment:
    found = ctx.env(env_id)
    if not isinstance(found, GatewayDeployment):
        raise StepError(f"env '{env_id}' was not deployed behind a gateway")
    return found


#: A script line importing the official ``mcp`` package (``import mcp``, ``from mcp.x import``).
_IMPORTS_MCP = re.compile(r"^\s*(?:from|import)\s+mcp(?:_types)?(?:\.|\s|$)", re.MULTILINE)


def imports_mcp(script: str) -> bool:
    """Whether a verify script imports the official ``mcp`` client (or its ``mcp_types``):
    worth loading early, and the only scripts whose results need 1.x attribute names."""
    return _IMPORTS_MCP.search(script) is not None


def artifact_imports_mcp(sources: Iterable[bytes]) -> bool:
    """Whether any Python file of a verifier's artifact (its ``verify.py`` or a module beside
    it) imports ``mcp``: what decides both the early load and the 1.x aliases."""
    return any(imports_mcp(source.decode("utf-8", "replace")) for source in sources)


async def preload_mcp_client() -> None:
    """Import the official ``mcp`` client in a worker thread.

    Why: it costs about half a second of CPU (pydantic, httpx, anyio) that would otherwise sit
    between a ready env and its verdict; a verifier starts it when the task starts, so it
    loads while the env deploys. A script using AgentEnv's own client
    (``agentenv_protocol.client``, which the run has imported already) pays nothing.
    """
    if "mcp.client.streamable_http" in sys.modules:
        return
    _freeze_objects_at_exit()

    def load() -> None:
        try:
            importlib.import_module("mcp.client.streamable_http")
        except Exception:  # a missing mcp shows up, with its message, when a script imports it
            pass

    await asyncio.get_running_loop().run_in_executor(None, load)


#: Set in the runtime's state once the exit handler is registered (another runtime registering
#: it again is harmless: freezing twice is freezing).
FREEZE_STATE = "agentenv_mcp_env.freeze_at_exit"


def _freeze_objects_at_exit() -> None:
    """At exit, move every object to gc's permanent generation (``gc.freeze``).

    Why: the official mcp client brings pydantic and about a million objects, and the
    interpreter's final collections over them took ~0.17 s of every ``agent-env run echo-mcp``
    (measured: exit 0.24 s -> 0.065 s). Objects are still released by reference counting; only
    cyclic garbage left at exit is not collected, which the interpreter never promised to
    finalise anyway. Registered first, so it runs after every other exit handler.
    """
    from agent_env.api import current

    state = current().state
    if not state.get(FREEZE_STATE):
        import atexit
        import gc

        atexit.register(gc.freeze)
        state[FREEZE_STATE] = True


@attrs.define(kw_only=True)
class EnvOutcomeVerifier(Step):
    """Score a deployed env with a script's ``async verify(mcp_url)`` rows."""

    type = "env_outcome_verifier"
    entity_fields = {"env_id": "envs", "file_artifact_id": "artifacts"}
    version_fields = {"file_artifact_version": "file_artifact_id"}

    env_id: str
    file_artifact_id: str
    file_artifact_version: int | None = None
    verifier_id: str | None = None
    score_aggregator: str = "all_pass"
    #: Ours: the script's file in the artifact (default ``verify.py``, or its only ``.py``).
    script_file: str | None = None
    timeout_seconds: float | None = None
    #: The prompt whose conversation a ``verify(mcp_url, run)`` script gets (default: the
    #: run's last answered prompt; see :mod:`agentenv_mcp_env.run_context`).
    prompt_id: str | None = None

    def check(self, view: PreflightView) -> list[str]:
        return super().check(view) + _aggregator_problems(self.score_aggregator)

    def run_context(self, ctx: TaskContext) -> Any:
        """The :class:`~agentenv_mcp_env.run_context.Run` its script may ask for."""
        from agent_env.api import find_reply
        from agentenv_mcp_env.run_context import env_urls, run_of

        envs = env_urls(ctx.envs)
        if self.prompt_id is not None:
            reply = find_reply(ctx, self.prompt_id)
            if reply is None:
                raise StepError(f"no reply to prompt '{self.prompt_id}' is recorded")
            return run_of(reply, envs)
        answered = [o for o in ctx.outputs.values()
                    if isinstance(o, dict) and "prompt_id" in o and "response" in o]
        return run_of(answered[-1] if answered else None, envs)

    def _entry(self, artifact: Any) -> str:
        """The script to run: ``script_file``, else ``verify.py``, else the only ``.py``."""
        names = [f.path for f in artifact.files if f.path.endswith(".py")]
        entry = self.script_file or ("verify.py" if "verify.py" in names else
                                     names[0] if len(names) == 1 else None)
        if entry is None or entry not in names:
            raise StepError(f"artifact {artifact.id} has no verify.py (its Python files: "
                            f"{', '.join(names) or 'none'})")
        return entry

    async def prepare(self, ctx: TaskContext) -> None:
        """Load the official ``mcp`` client while the env deploys, if the script uses it."""
        artifact = await ctx.artifact(self.file_artifact_id, self.pinned("file_artifact_id"))
        self._entry(artifact)  # no verify.py: said now, not after the deploy
        if artifact_imports_mcp(f.data for f in artifact.files if f.path.endswith(".py")):
            await preload_mcp_client()

    async def run(self, ctx: TaskContext) -> None:
        import tempfile

        env = deployment(ctx, self.env_id)
        artifact = await ctx.artifact(self.file_artifact_id, self.pinned("file_artifact_id"))
        entry = self._entry(artifact)
        timeout = float(self.timeout_seconds or DEFAULT_VERIFY_TIMEOUT)
        with tempfile.TemporaryDirectory(prefix="agent-env-verify-") as scratch:
            for item in artifact.files:
                parts = item.path.split("/")
                if ".." in parts or item.path.startswith("/"):
                    continue
                target = Path(scratch, *parts)
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(item.data)
            verify = _load_entry(Path(scratch, *entry.split("/")), "verify", artifact.id)
            try:
                takes_run = "run" in inspect.signature(verify).parameters
                result = (verify(env.mcp_url, run=self.run_context(ctx)) if takes_run
                          else verify(env.mcp_url))
                if inspect.isawaitable(result):
                    result = await asyncio.wait_for(result, timeout)
            except TimeoutError:
                await _fail_if_down(env, f"{entry}: verify() did not finish within {timeout:g}s")
                raise StepError(f"{entry}: verify() did not finish within {timeout:g}s") \
                    from None
            except StepError:
                raise
            except Exception as exc:
                await _fail_if_down(env, f"{entry}: verify() raised {_last_frame(exc)}")
                raise StepError(f"{entry}: verify() raised {_last_frame(exc)}") from None
        rows = rows_from_script(result, entry)
        failed = [r for r in rows if not r.result]
        if failed:
            await _fail_if_down(env, f"{entry} reported: " + "; ".join(
                f"{r.criterion.get('id', r.criterion_index)}: {r.justification}" for r in failed))
        ctx.record_verification(self, self.verifier_id, rows, self.score_aggregator)


async def _fail_if_down(env: GatewayDeployment, what: str) -> None:
    """Raise an InfraError naming the cause when the env went down (the run is ``error``, not
    the agent's failure), else return."""
    from agentenv_mcp_env.deployment import why_down

    reason = await why_down(env)
    if reason is not None:
        raise InfraError(f"env {env.environment_name} went down during the run: {reason}\n"
                        f"({what})")


def _load_entry(path: Path, name: str, artifact_id: str) -> Any:
    """Import ``path`` as a fresh module (its folder on ``sys.path`` while it loads)."""
    module_name = f"agent_env_verify_{abs(hash((str(path), id(path)))):x}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise StepError(f"cannot load {path.name} of artifact {artifact_id}")
    module = importlib.util.module_from_spec(spec)
    from agentenv_mcp_env.mcp_compat import script_builtins

    source = path.read_bytes()
    uses_mcp = artifact_imports_mcp([source, *(py.read_bytes() for py in path.parent.rglob("*.py")
                                               if py != path)])  # the artifact's own files
    compat = script_builtins(source.decode("utf-8", "replace"), uses_mcp=uses_mcp)
    if compat is not None:  # an mcp 1.x script on mcp 2.x: see mcp_compat
        module.__dict__["__builtins__"] = compat
    sys.path.insert(0, str(path.parent))
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        raise StepError(f"{path.name} of artifact {artifact_id} failed to import: "
                        f"{_last_frame(exc)}") from None
    finally:
        sys.path.remove(str(path.parent))
    function = getattr(module, name, None)
    if not callable(function):
        raise StepError(f"{path.name} of artifact {artifact_id} has no {name}() function")
    return function


def _last_frame(exc: BaseException) -> str:
    """``TypeError: x (verify.py:12)``: the error and the script line it came from."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if "agent_env_verify" in (f.filename or "") or f.filename.endswith(".py")]
    where = f" ({Path(frames[-1].filename).name}:{frames[-1].lineno})" if frames else ""
    return f"{type(exc).__name__}: {exc}{where}"


def rows_from_script(result: Any, entry: str) -> list[ScoreRow]:
    """``verify()``'s rows as score rows; StepError naming the script when malformed."""
    from agent_env.api import rows_from_results

    try:
        return list(rows_from_results(result, f"{entry}: verify()"))
    except ValueError as exc:
        raise StepError(str(exc)) from None


@attrs.define(kw_only=True)
class ResetEnv(Step):
    """``data/reset`` on a deployed env (every env server behind the gateway that serves it)."""

    type = "reset_env"
    example = {'id': 'reset', 'type': 'reset_env', 'env_id': 'notes'}
    entity_fields = {"env_id": "envs"}

    env_id: str

    async def run(self, ctx: TaskContext) -> None:
        from agentenv_protocol.client import DataPlaneClient
        from agentenv_protocol.errors import ProtocolError, TransportError

        env = deployment(ctx, self.env_id)
        try:
            async with DataPlaneClient(env.url, headers=env.headers) as client:
                await client.reset()
        except (ProtocolError, TransportError) as exc:
            raise StepError(f"data/reset on {env.environment_name} failed: {exc}") from None
        ctx.outputs[self.id] = {"reset": True}


@attrs.define(kw_only=True)
class _EnvCheckStep(Step):
    """A protocol check against a deployed env, recorded as a verification of named rows."""

    entity_fields = {"env_id": "envs"}

    env_id: str
    verifier_id: str | None = None
    score_aggregator: str = "all_pass"

    def check(self, view: PreflightView) -> list[str]:
        return super().check(view) + _aggregator_problems(self.score_aggregator)

    async def run(self, ctx: TaskContext) -> None:
        from agentenv_mcp_env import checks

        env = deployment(ctx, self.env_id)
        name = self.type.removeprefix("verify_env_").removeprefix("verify_")
        results = await getattr(checks, f"check_{name}")(env)
        rows = [ScoreRow(i, 1.0 if r.passed else 0.0, r.passed, r.why,
                         criterion={"criterion": r.name}) for i, r in enumerate(results)]
        ctx.record_verification(self, self.verifier_id, rows, self.score_aggregator)


@attrs.define(kw_only=True)
class VerifyEnvCard(_EnvCheckStep):
    """The composed card: a name, tools with object schemas, named children, operations."""

    type = "verify_env_card"
    example = {'id': 'card', 'type': 'verify_env_card', 'env_id': 'notes'}


@attrs.define(kw_only=True)
class VerifyMcpToolSchema(_EnvCheckStep):
    """Every tool as an agent lists it: a description, and each parameter typed and described
    (arrays with items, objects with properties, no empty enum), a row per tool. The SDK
    describes a parameter given as ``Annotated[str, "what it is"]``."""

    type = "verify_mcp_tool_schema"
    example = {'id': 'schemas', 'type': 'verify_mcp_tool_schema', 'env_id': 'notes'}
    #: The gate ``validation_gate_aggregator`` looks for, as the reference names it.
    verifier_id: str | None = "mcp_tool_schema"


@attrs.define(kw_only=True)
class VerifyEnvCoreProtocol(_EnvCheckStep):
    """MCP initialize/list/call, unknown tools, the data plane, ``/ready`` and the token."""

    type = "verify_env_core_protocol"
    example = {'id': 'core', 'type': 'verify_env_core_protocol', 'env_id': 'notes'}
