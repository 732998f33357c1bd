"""Agents: a warm ``agent-env run agents-smoke`` against its Docker floor, the model gateway's
cost per model call, and 8 agents prompted side by side against one. Needs Docker.

* **Run vs floor.** The floor is the agents-smoke run at its least, by hand: a Docker network,
  ``docker run -d`` of the echo env, the model gateway and the model-agent images on it (the
  agent reaches them by name, as in a run: ``http://echo:18765/mcp``,
  ``http://model-gateway:4000/v1``), waiting for the env's ``/ready``, the gateway's
  ``/healthz`` and the agent's card, loading the scripted model's script over the gateway's
  admin route, giving the agent the env over ``/ext/mcp-config``, one A2A ``message/send``
  (non-blocking) and ``tasks/get`` until completed (two model calls and a tool call inside the
  agent), ``docker rm -f`` and ``docker network rm``. The images are the ones the run built
  (read from its output). Floor and warm run alternate, so drift hits both alike.
* **Model gateway overhead.** Chat Completions calls, one at a time over a kept-alive
  connection, to a FAKE OpenAI-compatible upstream (the test double
  ``tests/integration/agents/fake_openai_upstream.py``, a real HTTP server answering fixed
  text) directly, and through the model gateway (``python -m agentenv_agents.gateway_server``,
  its container's entry point, run as a local process) forwarding to it; calls alternate.
  The figure is the difference of the medians.
* **8 agents side by side.** In one task (the kernel's ``TaskContext`` and steps, as a run
  does): the echo env deployed once, 8 model-agents deployed on it (one model gateway in its
  sandbox, shared), then rounds of one agent's prompt alone and of all 8 prompted at once
  (``asyncio.gather`` of 8 ``prompt_agent`` steps); each sample is the wall time until every
  answer of the round is in. Deploying is not timed. The bar's pair polls the agent's task
  every 0.2 s (set on the step: the default until the poll started at 0.02 s and grew), which a
  lone prompt mostly spends waiting; a second pair, on the default poll and without a bar,
  shows how the work itself scales: 8 prompts' CPU on 2 cores, about 3.5x one.

``python -m bench --only agents`` runs it alone.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import secrets
import statistics
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

from bench.bars import Bar
from bench.echo_mcp import _agent_env, _free_port
from bench.measure import Series, bytecode_cached, time_command

ROOT = Path(__file__).resolve().parent.parent
FAKE_UPSTREAM_DIR = ROOT / "tests" / "integration" / "agents"
FLOOR = "agents-smoke floor: 3 docker runs, 1 prompt, rm -f"
WARM = "agent-env run agents-smoke (warm)"
DIRECT = "chat completion, direct to a fake upstream"
VIA = "chat completion, via the model gateway"
DIRECT_LONG = "chat completion with a 200 KB history, direct to a fake upstream"
VIA_LONG = "chat completion with a 200 KB history, via the model gateway"
#: The long history: this many turns of ``HISTORY_TURN_BYTES`` each (an agent deep in a task).
HISTORY_TURNS, HISTORY_TURN_BYTES = 40, 5_000
ONE = "1 agent prompted (one env)"
EIGHT = "8 agents prompted side by side (one env)"
#: The bar's pair polls every ``STEADY_POLL`` (set on the step), the poll the bar was set on;
#: a lone prompt's time is then mostly waiting for the next poll, which flatters the ratio.
STEADY_POLL = 0.2
#: The same on the default poll (after 0.02 s, growing to 0.2 s): how the work itself scales
#: (no bar: 8 prompts on 2 cores cost 8 prompts' CPU whatever AgentEnv does).
ONE_DEFAULT = "1 agent prompted, the default poll"
EIGHT_DEFAULT = "8 agents side by side, the default poll"
SIDE_BY_SIDE = 8
TEXT = "agents smoke 7431"
PROMPT = f"Call the echo tool with the text '{TEXT}' and answer with what it returned."
SCRIPT = "echo_script"
#: Issue 39's bars: a warm run within 2x its floor; the model gateway adds at most 0.5 ms to a
#: model call's median, a short one or one carrying a 200 KB history; 8 agents prompted at
#: once finish within 2x the time of one.
BARS = (
    Bar(WARM, at_most=2),
    Bar(VIA, "added_ms", at_most=0.5, unit="ms"),
    Bar(VIA_LONG, "added_ms", at_most=0.5, unit="ms"),
    Bar(EIGHT, at_most=2),
)
#: ``envs/echo: image agentenv/echo:<hash> (cached)`` (or ``built in ...``), and the same for
#: ``model-gateway`` and ``agents/model-agent``, among a run's progress lines.
IMAGE_LINES = {
    "env": re.compile(r"envs/echo: image (\S+)"),
    "gateway": re.compile(r"model-gateway: image (\S+)"),
    "agent": re.compile(r"agents/model-agent: image (\S+)"),
}


def images(output: str) -> dict[str, str]:
    """The echo env's, model gateway's and model-agent's image references from a run's output."""
    found = {}
    for role, pattern in IMAGE_LINES.items():
        match = pattern.search(output)
        if not match:
            raise RuntimeError(f"no {role} image line in the run's output:\n{output[-2000:]}")
        found[role] = match.group(1)
    return found


def _smoke_bundle() -> Path:
    from agentenv_agents.plugin import BUNDLES

    return Path(BUNDLES) / "agents-smoke"


# -- the floor, by hand ---------------------------------------------------------------------


def _http(method: str, url: str, body: Any = None, token: str | None = None,
          timeout: float = 10) -> Any:
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data, headers, method=method)
    with urllib.request.urlopen(request, timeout=timeout) as response:
        text = response.read().decode()
    return json.loads(text) if text else None


def _wait(url: str, deadline: float) -> None:
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            if time.monotonic() > deadline:
                raise
        time.sleep(0.01)


def _docker(*argv: str) -> str:
    return subprocess.run(["docker", *argv], capture_output=True, text=True,
                          check=True).stdout.strip()


def floor_once(image: dict[str, str], script: dict[str, Any]) -> float:
    """One agents-smoke prompt done by hand; the wall time from network to teardown."""
    start = time.perf_counter()
    suffix = uuid.uuid4().hex[:8]
    network = f"bench-agents-{suffix}"
    token, admin, a2a = (secrets.token_urlsafe(16) for _ in range(3))
    env_port, gateway_port, agent_port = _free_port(), _free_port(), _free_port()
    _docker("network", "create", network)
    containers: list[str] = []
    try:
        containers.append(_docker(
            "run", "-d", "--network", network, "--network-alias", "echo",
            "-p", f"127.0.0.1:{env_port}:18765", "-e", "MCP_HOST=0.0.0.0",
            "-e", "MCP_PORT=18765", image["env"]))
        containers.append(_docker(
            "run", "-d", "--network", network, "--network-alias", "model-gateway",
            "-p", f"127.0.0.1:{gateway_port}:4000", "-e", f"AGENTENV_MODEL_TOKEN={token}",
            "-e", f"AGENTENV_MODEL_ADMIN_TOKEN={admin}", "-e", "AGENTENV_MODEL_PORT=4000",
            image["gateway"]))
        containers.append(_docker(
            "run", "-d", "--network", network, "-p", f"127.0.0.1:{agent_port}:8000",
            "-e", "A2A_PORT=8000", "-e", f"A2A_TOKEN={a2a}",
            "-e", "AGENTENV_MODEL_BASE_URL=http://model-gateway:4000/v1",
            "-e", f"AGENTENV_MODEL_TOKEN={token}",
            "-e", f"AGENTENV_MODEL_NAME=scripted:{SCRIPT}", image["agent"]))
        deadline = time.monotonic() + 60
        gateway = f"http://127.0.0.1:{gateway_port}"
        agent = f"http://127.0.0.1:{agent_port}"
        _wait(f"http://127.0.0.1:{env_port}/ready", deadline)
        _wait(f"{gateway}/healthz", deadline)
        _http("POST", f"{gateway}/admin/scripts", {"name": SCRIPT, "script": script}, admin)
        _wait(f"{agent}/.well-known/agent.json", deadline)
        _http("POST", f"{agent}/ext/mcp-config",
              {"url": "http://echo:18765/mcp", "headers": {}, "name": "echo"}, a2a)
        message = {"messageId": uuid.uuid4().hex, "role": "user", "contextId": uuid.uuid4().hex,
                   "parts": [{"kind": "text", "text": PROMPT}]}
        task = _http("POST", f"{agent}/a2a", {
            "jsonrpc": "2.0", "id": 1, "method": "message/send",
            "params": {"message": message, "configuration": {"blocking": False}}}, a2a)["result"]
        while task["status"]["state"] not in ("completed", "failed", "canceled", "rejected"):
            if time.monotonic() > deadline:
                raise RuntimeError(f"the floor's prompt did not finish: {task}")
            time.sleep(0.02)
            task = _http("POST", f"{agent}/a2a", {
                "jsonrpc": "2.0", "id": 2, "method": "tasks/get",
                "params": {"id": task["id"]}}, a2a)["result"]
        answer = " ".join(p.get("text", "") for p in task["status"]["message"]["parts"])
        if task["status"]["state"] != "completed" or TEXT not in answer:
            raise RuntimeError(f"the floor's prompt did not answer {TEXT!r}: {task['status']}")
    finally:
        if containers:
            subprocess.run(["docker", "rm", "-f", *containers], capture_output=True, check=True)
        subprocess.run(["docker", "network", "rm", network], capture_output=True, check=True)
    return time.perf_counter() - start


def run_vs_floor(repeat: int, workdir: Path, agent_env: list[str],
                 smoke: bool) -> list[Series]:
    env = {"AGENT_ENV_STATE_DIR": str(workdir / "state-agents")}
    command = [*agent_env, "run", "agents-smoke"]
    full_env = {**os.environ, **env}
    first = _agent_env(command, full_env)  # ledger, images (built if missing)
    image = images(first)
    script = json.loads((_smoke_bundle() / "artifacts" / SCRIPT / "script.json").read_text())
    if not smoke:
        _agent_env(command, full_env)  # a second run: every cache warm
        floor_once(image, script)  # the first docker run of a session pays extra; not counted
    floor: list[float] = []
    warm: list[float] = []
    for _ in range(repeat):
        floor.append(floor_once(image, script))
        warm += time_command(command, repeat=1, env=env)[0]
    return [
        Series(FLOOR, floor),
        Series(WARM, warm, baseline=FLOOR),
    ]


# -- the model gateway's overhead -----------------------------------------------------------

FAKE_SERVER = """
import sys
from aiohttp import web
sys.path.insert(0, sys.argv[1])
from fake_openai_upstream import FakeUpstream
web.run_app(FakeUpstream().app(), host="127.0.0.1", port=int(sys.argv[2]), print=None,
            access_log=None)
"""


async def _ready(url: str, timeout: float = 20) -> None:
    import aiohttp

    deadline = time.monotonic() + timeout
    async with aiohttp.ClientSession() as http:
        while True:
            try:
                async with http.get(url) as response:
                    if response.status < 500:  # any answer: it serves
                        return
            except aiohttp.ClientError:
                if time.monotonic() > deadline:
                    raise
            await asyncio.sleep(0.01)


async def _gateway_overhead(calls: int) -> list[Series]:
    import aiohttp

    sys.path.insert(0, str(FAKE_UPSTREAM_DIR))
    try:
        from fake_openai_upstream import KEY  # the test double's upstream key
    finally:
        sys.path.remove(str(FAKE_UPSTREAM_DIR))
    upstream_port, gateway_port = _free_port(), _free_port()
    token, admin = secrets.token_urlsafe(16), secrets.token_urlsafe(16)
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    upstream = subprocess.Popen([sys.executable, "-c", FAKE_SERVER, str(FAKE_UPSTREAM_DIR),
                                 str(upstream_port)], **quiet)
    gateway = subprocess.Popen(
        [sys.executable, "-m", "agentenv_agents.gateway_server"],
        env={**os.environ, "AGENTENV_MODEL_TOKEN": token, "AGENTENV_MODEL_ADMIN_TOKEN": admin,
             "AGENTENV_MODEL_PORT": str(gateway_port),
             "AGENTENV_UPSTREAM_BASE_URL": f"http://127.0.0.1:{upstream_port}/v1",
             "AGENTENV_UPSTREAM_API_KEY": KEY}, **quiet)
    try:
        direct_url = f"http://127.0.0.1:{upstream_port}/v1/chat/completions"
        via_url = f"http://127.0.0.1:{gateway_port}/v1/chat/completions"
        await _ready(f"http://127.0.0.1:{upstream_port}/v1/models")
        await _ready(f"http://127.0.0.1:{gateway_port}/healthz")
        short = {"model": "fake-model", "messages": [
            {"role": "system", "content": "You are a helpful agent."},
            {"role": "user", "content": PROMPT}]}
        filler = "The tool answered with a long listing of the env's records. " * (
            HISTORY_TURN_BYTES // 60)
        long = {"model": "fake-model", "messages": [
            *short["messages"],
            *({"role": "assistant" if i % 2 else "user", "content": f"{i}: {filler}"}
              for i in range(HISTORY_TURNS))]}
        samples: dict[str, tuple[list[float], list[float]]] = {
            "short": ([], []), "long": ([], [])}
        async with aiohttp.ClientSession() as http:

            async def call(url: str, key: str, body: dict[str, Any]) -> float:
                started = time.perf_counter()
                async with http.post(url, json=body,
                                     headers={"Authorization": f"Bearer {key}"}) as response:
                    reply = await response.json()
                took = time.perf_counter() - started
                if response.status != 200 or "choices" not in reply:
                    raise RuntimeError(f"POST {url}: HTTP {response.status}: {reply}")
                return took

            for body in (short, long):
                for _ in range(10):  # connections, caches
                    await call(direct_url, KEY, body)
                    await call(via_url, token, body)
            for _ in range(calls):  # alternate, so drift hits both alike
                for kind, body in (("short", short), ("long", long)):
                    direct, via = samples[kind]
                    direct.append(await call(direct_url, KEY, body))
                    via.append(await call(via_url, token, body))
    finally:
        for process in (gateway, upstream):
            process.terminate()
            process.wait()
    size = len(json.dumps(long)) / 1000
    out = []
    for kind, direct_name, via_name in (("short", DIRECT, VIA), ("long", DIRECT_LONG, VIA_LONG)):
        direct, via = samples[kind]
        added_ms = (statistics.median(via) - statistics.median(direct)) * 1000
        out += [
            Series(direct_name, direct, note="a test double: fixed answer, real HTTP"
                   + (f"; request {size:.0f} KB" if kind == "long" else "")),
            Series(via_name, via, baseline=direct_name, note=f"{added_ms:+.2f} ms median",
                   figures={"added_ms": added_ms}),
        ]
    return out


# -- 8 agents side by side ------------------------------------------------------------------


async def _side_by_side(rounds: int, workdir: Path) -> list[Series]:
    from agent_env import runtime
    from agent_env.bundles.entities import StoredArtifacts
    from agent_env.bundles.ledger import Ledger
    from agent_env.bundles.parse import parse_bundle
    from agent_env.runtime import current
    from agent_env.tasks.context import TaskContext
    from agent_env.tasks.step_types.env_steps import DeployEnv
    from agentenv_agents.model_steps import ScriptedModel
    from agentenv_agents.steps import DeployAgent, PromptAgent

    os.environ["AGENT_ENV_STATE_DIR"] = str(workdir / "state-agents-side-by-side")
    runtime.reset()
    bundle, problems = parse_bundle(_smoke_bundle(), "@bench/agents-smoke")
    if problems:
        raise RuntimeError(f"agents-smoke does not parse: {problems}")
    ledger = Ledger(current().versioned_store, current().object_store)
    for env in bundle.envs:
        ledger.write_files_entity("envs", env)
    for artifact in bundle.artifacts:
        ledger.write_files_entity("artifacts", artifact)
    ids = {e.name: e.id for e in bundle.envs} | {a.name: a.id for a in bundle.artifacts}
    ctx = TaskContext(task_id="@bench/agents-smoke/side-by-side",
                      instance_id=f"bench-{uuid.uuid4().hex[:8]}",
                      artifacts=StoredArtifacts(current().versioned_store, current().object_store))
    names = [f"agent{n}" for n in range(SIDE_BY_SIDE)]
    one: list[float] = []
    eight: list[float] = []
    one_default: list[float] = []
    eight_default: list[float] = []
    try:
        await DeployEnv(id="deploy", env_id=ids["echo"], sandbox_type="docker").run(ctx)
        await ScriptedModel(id="model", script_artifact_id=ids[SCRIPT]).run(ctx)
        await asyncio.gather(*(DeployAgent(
            id=f"deploy-{name}", agent_name=name, a2a_agent_id="model-agent",
            env_ids=[ids["echo"]]).run(ctx) for name in names))

        async def prompt(name: str, poll: float | None) -> None:
            step = f"ask-{name}-{uuid.uuid4().hex[:8]}"
            await PromptAgent(id=step, agent_name=name, prompt=PROMPT,
                              model=f"scripted:{SCRIPT}", context_id=uuid.uuid4().hex,
                              timeout_seconds=120, poll_interval_seconds=poll).run(ctx)
            reply = ctx.outputs[step]
            if TEXT not in (reply.get("response") or "") or reply.get("error_type"):
                raise RuntimeError(f"agent {name} did not answer {TEXT!r}: {reply}")

        async def timed(agents: list[str], poll: float | None = None) -> float:
            started = time.perf_counter()
            await asyncio.gather(*(prompt(name, poll) for name in agents))
            return time.perf_counter() - started

        await timed(names)  # untimed: every agent's first prompt (connections, imports)
        for _ in range(rounds):  # alternate, so drift hits all alike
            one.append(await timed(names[:1], STEADY_POLL))
            eight.append(await timed(names, STEADY_POLL))
            one_default.append(await timed(names[:1]))
            eight_default.append(await timed(names))
    finally:
        report = await ctx.teardown.run()
        if report.failed:
            raise RuntimeError(f"teardown failed: {report.failed}")
    return [
        Series(ONE, one, note=f"prompt_agent: message/send, tasks/get every {STEADY_POLL:g} s "
               "(set on the step), records"),
        Series(EIGHT, eight, baseline=ONE, note="8 model-agents, one model gateway, one env"),
        Series(ONE_DEFAULT, one_default, note="no bar: the work without a steady poll's wait"),
        Series(EIGHT_DEFAULT, eight_default, baseline=ONE_DEFAULT),
    ]


def run(*, quick: bool, workdir: Path, agent_env: list[str], smoke: bool = False) -> list[Series]:
    with bytecode_cached():
        repeat = 1 if smoke else 3 if quick else 7
        series = run_vs_floor(repeat, workdir, agent_env, smoke)
        series += asyncio.run(_gateway_overhead(20 if smoke else 200 if quick else 1000))
        series += asyncio.run(_side_by_side(1 if smoke else 3 if quick else 7, workdir))
        return series
