"""The reference's own hello, echo-mcp and mail-mcp bundles, fetched from PyPI at test time, run
unchanged: its Dockerfile (``FROM public.ecr.aws/...@sha256:...``, ``agentenv-framework-
protocol==0.1.379``), its task file (``sandbox_type: local``) and its verify.py, written for the
official mcp 1.x client (``as (read, write, _)``, ``result.isError``) while mcp 2.x is installed
here. Nothing of the reference is committed: the wheel is downloaded into a temporary folder.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.docker

REFERENCE = "agentenv-framework==0.9.1364"
AGENT_ENV = Path(sys.executable).with_name("agent-env")


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


@pytest.fixture(scope="module")
def examples(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The reference wheel's example bundles (``agent_env/examples/<name>``), unzipped; its
    agents bundle (``agent_env/agents``) is beside them, at ``examples.parent / "agents"``."""
    folder = tmp_path_factory.mktemp("reference")
    done = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check",
         "-q", REFERENCE, "-d", str(folder)],
        capture_output=True, text=True, timeout=300, check=False)
    wheels = sorted(folder.glob("*.whl"))
    if done.returncode != 0 or not wheels:
        message = f"cannot download {REFERENCE} from PyPI: {done.stderr.strip()[-500:]}"
        if in_ci():
            pytest.fail(message + " (CI never skips this test)")
        pytest.skip(message)
    with zipfile.ZipFile(wheels[0]) as wheel:
        members = [m for m in wheel.namelist()
                   if "/examples/" in m or m.startswith("agent_env/agents/")]
        wheel.extractall(folder / "unzipped", members)
    found = {p.parent.parent.name: p.parent.parent for p in
             (folder / "unzipped").glob("**/examples/*/tasks/smoke.json")}
    assert {"echo-mcp", "mail-mcp"} <= set(found), sorted(found)
    return found["echo-mcp"].parent


def digest(folder: Path) -> str:
    """Of every file under ``folder``: the run must leave the bundle exactly as it was."""
    total = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        total.update(str(path.relative_to(folder)).encode() + b"\0" + path.read_bytes())
    return total.hexdigest()


def run(state: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "AGENT_ENV_STATE_DIR": str(state)}
    env.pop("AGENT_ENV_CONFIG", None)
    return subprocess.run([str(AGENT_ENV), *args], capture_output=True, text=True, env=env,
                          timeout=900, check=False)


def left(client: Any, output: str) -> list[str]:
    import re

    names = []
    for instance in re.findall(r"instance (\S+)", output):
        label = {"label": f"agentenv.run={instance}"}
        names += [c["Names"][0] for c in client.api.containers(all=True, filters=label)]
        names += [n["Name"] for n in client.api.networks(filters=label)]
    return names


def test_reference_echo_mcp_runs_unchanged(examples: Path, tmp_path: Path,
                                           docker_client: Any) -> None:
    bundle = examples / "echo-mcp"
    verify = (bundle / "artifacts" / "check_echo" / "verify.py").read_text()
    # What makes this test mean something: a 1.x script and a base only a registry has.
    assert "as (read, write, _)" in verify and "result.isError" in verify
    assert "public.ecr.aws" in (bundle / "envs" / "echo" / "Dockerfile").read_text()
    before = digest(bundle)

    done = run(tmp_path / "state", "run", str(bundle))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "tasks/smoke.json v1: passed (echoes: 1)" in done.stdout
    assert left(docker_client, done.stdout) == []
    assert digest(bundle) == before


def test_reference_mail_mcp_runs_unchanged(examples: Path, tmp_path: Path,
                                           docker_client: Any) -> None:
    bundle = examples / "mail-mcp"
    before = digest(bundle)
    done = run(tmp_path / "state", "run", str(bundle))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "tasks/smoke.json v1: passed (finds-the-invoice: 1)" in done.stdout
    assert left(docker_client, done.stdout) == []
    assert digest(bundle) == before


def test_reference_hello_runs_unchanged_on_the_local_sandbox(examples: Path,
                                                            tmp_path: Path) -> None:
    """Its task file names ``sandbox_mode: vm`` and ``sandbox_type: local``, and its criteria are
    the reference's own (``probe_file_contains``, ``bash_cmd_succeeds``)."""
    bundle = examples / "hello"
    assert '"sandbox_type": "local"' in (bundle / "tasks" / "hello.json").read_text()
    before = digest(bundle)
    done = run(tmp_path / "state", "run", str(bundle))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "tasks/hello.json v1: passed (hello: 1)" in done.stdout
    assert "Tore down 1 sandbox." in done.stdout
    assert digest(bundle) == before


def test_reference_agents_bundle_passes_preflight(examples: Path, tmp_path: Path) -> None:
    """The reference's agents bundle: six agent folders under ``agents/`` (Dockerfiles, no
    agent.toml) and a smoke task deploying each by its folder name. Preflight finds each in the
    bundle's own ``agents/`` (before the run stores it). Its agents install CLIs from the
    network and ask real models, so here it is checked, not run."""
    bundle = examples.parent / "agents"
    assert (bundle / "agents" / "gemini" / "Dockerfile").is_file()
    assert not (bundle / "agents" / "gemini" / "agent.toml").exists()
    before = digest(bundle)
    done = run(tmp_path / "state", "run", str(bundle), "--dry-run")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    for name in ("claude-code", "codex", "gemini", "opencode", "openhands", "pi"):
        assert f"agents/{name}: would write v1 (new)" in done.stdout
        assert f"[tasks/{name}-smoke.json] would run 3 steps: deploy, ask, check" in done.stdout
    assert digest(bundle) == before
