"""``install_agent``'s checks that need no container: its preflight, and what it accepts of
the archive an agent's image exports (install/v1)."""

from __future__ import annotations

import io
import json
import tarfile
from typing import Any

import pytest

from agent_env.api import PreflightView, StepError
from agentenv_agents.install_steps import InstallAgent, read_archive
from agentenv_protocol.agent import INSTALL_V1

VIEW = PreflightView(step_ids=frozenset({"i"}))
CARD = {"name": "a", "capabilities": {"extensions": [{"uri": INSTALL_V1, "params": {}}]}}


def archive(*members: tuple[str, Any], manifest: Any = None) -> bytes:
    """A gzipped tar: ``(name, bytes)`` files, ``(name, "dir")`` folders, ``(name, "->x")``
    symlinks; the manifest first unless None."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        if manifest is not None:
            data = json.dumps(manifest).encode()
            info = tarfile.TarInfo("agentenv-install.json")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        for name, body in members:
            info = tarfile.TarInfo(name)
            if body == "dir":
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            elif isinstance(body, str) and body.startswith("->"):
                info.type, info.linkname = tarfile.SYMTYPE, body[2:]
                tar.addfile(info)
            else:
                info.size = len(body)
                tar.addfile(info, io.BytesIO(body))
    return buffer.getvalue()


GOOD = {"card": CARD, "command": ["agent.py"], "a2a_port": 8000, "python": "3.11"}


def test_a_well_formed_export_gives_its_manifest() -> None:
    data = archive(("app", "dir"), ("app/agent.py", b"print()"), ("site/aiohttp/x.py", b""),
                   manifest=GOOD)
    assert read_archive(data, "img") == GOOD


@pytest.mark.parametrize(("member", "why"), [
    (("../escape.py", b""), "'../escape.py'"),
    (("/etc/passwd", b""), "'/etc/passwd'"),
    (("site/link", "->/etc/shadow"), "'site/link'"),
    (("elsewhere/x.py", b""), "'elsewhere/x.py'"),
])
def test_members_outside_app_and_site_or_links_are_refused(member: Any, why: str) -> None:
    with pytest.raises(StepError, match=f"exported {why}, which an install does not take"):
        read_archive(archive(("app/agent.py", b""), member, manifest=GOOD), "img")


@pytest.mark.parametrize(("manifest", "why"), [
    (None, "exported no agentenv-install.json"),
    ({**GOOD, "card": {"name": "a"}}, "a card without install/v1"),
    ({**GOOD, "command": []}, "no command to start it"),
])
def test_a_manifest_must_say_install_v1_and_how_to_start(manifest: Any, why: str) -> None:
    with pytest.raises(StepError, match=why):
        read_archive(archive(("app/agent.py", b""), manifest=manifest), "img")


def test_bytes_that_are_no_archive_are_one_error() -> None:
    with pytest.raises(StepError, match="exported no readable archive"):
        read_archive(b"not a tar", "img")


def test_preflight_names_each_bad_key() -> None:
    problems = InstallAgent(id="i", sandbox_name="box", a2a_port=70000, workspace_dir="rel",
                            timeout_seconds=0).check(VIEW)
    assert any("names no container_name" in p and "run_docker_container" in p
               for p in problems)
    assert "a2a_port: 70000 is not a port" in problems
    assert "workspace_dir 'rel' must be an absolute path" in problems
    assert "timeout_seconds must be positive" in problems
    assert InstallAgent(id="i", sandbox_name="box", container_name="c").check(VIEW) == []
