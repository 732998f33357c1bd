"""``agent-env run aider-smoke`` / ``claude-code-smoke`` / ``codex-smoke`` / ``gemini-smoke`` /
``mini-swe-agent-smoke`` / ``opencode-smoke`` / ``openhands-smoke`` / ``pi-smoke`` (the real
agents, scripted model) against ``agent-env run agents-smoke`` (the model-agent), warm,
measured side by side.

The baseline is the agents issue's floor as a run does it: the echo env, an agent container in
its sandbox next to the model gateway, one prompt with two scripted model calls and a tool call,
the verifiers. The coding-agent bundles do the same with the CLI image and a SECOND prompt in
the same context (the session resumed), so their ratio includes one more CLI start and model
round trip than the floor. Warm: every image is found by its content hash (the first run of
each bundle, not timed, builds what is missing and writes the ledger). The full run also times
a rebuild of each agent image after ``docker rmi`` (the engine's layer cache still holds the
npm layer, so this is the "nothing of ours cached" case, not a download from the registry).
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from bench.bars import Bar
from bench.measure import Series, time_command

FLOOR = "agent-env run agents-smoke (model-agent floor, warm)"
AGENTS = {"aider": "aider-smoke", "claude-code": "claude-code-smoke", "codex": "codex-smoke",
          "gemini": "gemini-smoke", "mini-swe-agent": "mini-swe-agent-smoke",
          "opencode": "opencode-smoke", "openhands": "openhands-smoke", "pi": "pi-smoke"}
#: The targets: a warm CLI-agent smoke run within 3x the model-agent's for claude-code and
#: codex, and within 1.3x for each agent added since (the more agents issue's bar).
LIMITS = {"aider": 1.3, "claude-code": 3.0, "codex": 3.0, "gemini": 1.3, "mini-swe-agent": 1.3,
          "opencode": 1.3, "openhands": 1.3, "pi": 1.3}
#: The bundles whose second prompt resumes the agent's session (one more agent start and model
#: round trip than the floor's single prompt).
RESUMES = {"aider", "claude-code", "codex", "gemini", "opencode", "openhands", "pi"}
BARS = tuple(Bar(f"agent-env run {bundle} (warm)", at_most=LIMITS[agent])
             for agent, bundle in AGENTS.items())


def _image(agent_env: list[str], env: dict[str, str], bundle: str, agent: str) -> str | None:
    out = subprocess.run([*agent_env, "run", bundle], capture_output=True, text=True,
                         env={**os.environ, **env}, check=True).stdout
    found = re.search(rf"agents/{agent}: image (agentenv/{agent}:[0-9a-f]+)", out)
    return found.group(1) if found else None


def run(*, quick: bool, workdir: Path, agent_env: list[str], smoke: bool = False) -> list[Series]:
    repeat = 1 if smoke else 3 if quick else 7
    env = {"AGENT_ENV_STATE_DIR": str(workdir / "state-coding-agents")}
    images = {}
    if not smoke:  # smoke: the first run is the sample (CI built the images in its tests)
        time_command([*agent_env, "run", "agents-smoke"], repeat=1, env=env)
        images = {agent: _image(agent_env, env, bundle, agent)
                  for agent, bundle in AGENTS.items()}
    floor: list[float] = []
    warm: dict[str, list[float]] = {agent: [] for agent in AGENTS}
    for _ in range(repeat):  # alternate, so drift hits floor and agents alike
        floor += time_command([*agent_env, "run", "agents-smoke"], repeat=1, env=env)[0]
        for agent, bundle in AGENTS.items():
            warm[agent] += time_command([*agent_env, "run", bundle], repeat=1, env=env)[0]
    series = [Series(FLOOR, floor)]
    series += [Series(f"agent-env run {bundle} (warm)", warm[agent], baseline=FLOOR,
                      note="two prompts (the second resumes the CLI session)"
                      if agent in RESUMES else "one prompt, as the floor's")
               for agent, bundle in AGENTS.items()]
    if not smoke and not quick:
        for agent, bundle in AGENTS.items():
            image = images.get(agent)
            if image:
                subprocess.run(["docker", "rmi", "-f", image], capture_output=True, check=True)
            rebuilt = time_command([*agent_env, "run", bundle], repeat=1, env=env)[0]
            series.append(Series(f"agent-env run {bundle} (agent image removed)", rebuilt,
                                 baseline=FLOOR, note="engine layer cache kept"))
    return series
