"""install/v1's export in the agent SDK: ``serve()`` with ``AGENTENV_INSTALL_EXPORT`` writes the
agent's files, its Python packages and its card to an archive and exits, instead of serving."""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
from pathlib import Path

AGENT = '''
from agentenv_protocol.agent import (AgentEnvAgent, AgentIdentity, TaskResult, a2a_agent,
                                     {extensions})
@a2a_agent(identity=AgentIdentity(name="exporter", version="1.0", description="d"),
           extensions=({listed}))
class Exporter(AgentEnvAgent):
    async def run(self, request):
        return TaskResult(text="hi")
if __name__ == "__main__":
    Exporter().serve()
'''


def write_agent(folder: Path, install: bool) -> Path:
    names = "INSTALL_V1, TRAJECTORY_V1" if install else "TRAJECTORY_V1"
    path = folder / "agent.py"
    path.write_text(AGENT.format(extensions=names, listed=names + ","))
    (folder / "helper.txt").write_text("the agent's own file")
    return path


def export(path: Path, target: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(path)], capture_output=True, text=True,
                          timeout=120, cwd=path.parent,
                          env={"AGENTENV_INSTALL_EXPORT": str(target), "A2A_PORT": "8123",
                               "PATH": "/usr/bin:/bin"})


def test_an_agent_listing_install_v1_exports_itself_and_exits(tmp_path: Path) -> None:
    agent = write_agent(tmp_path, install=True)
    target = tmp_path / "out" / "agent.tar.gz"
    done = export(agent, target)
    assert done.returncode == 0, done.stderr
    with tarfile.open(target) as archive:
        names = set(archive.getnames())
        manifest = json.loads(archive.extractfile("agentenv-install.json").read())  # type: ignore[union-attr]
    assert {"app/agent.py", "app/helper.txt"} <= names
    assert any(n.startswith("site/aiohttp/") for n in names)  # its packages travel with it
    assert not any(n.startswith(("site/pip/", "site/setuptools/")) or "__pycache__" in n
                   for n in names)
    assert manifest["command"] == ["agent.py"] and manifest["a2a_port"] == 8123
    assert manifest["python"] == f"{sys.version_info[0]}.{sys.version_info[1]}"
    (ext,) = [e for e in manifest["card"]["capabilities"]["extensions"]
              if e["uri"] == "urn:agentenv:install/v1"]
    assert ext["params"]["a2a_port"] == 8123 and ext["params"]["python"] == ">=3.11"
    assert not list(target.parent.glob("*.partial"))


def test_an_agent_without_install_v1_refuses_to_export(tmp_path: Path) -> None:
    agent = write_agent(tmp_path, install=False)
    done = export(agent, tmp_path / "agent.tar.gz")
    assert done.returncode == 3
    assert "does not declare install/v1" in done.stderr and "INSTALL_V1" in done.stderr
    assert not (tmp_path / "agent.tar.gz").exists()
