"""Installer choices that need no network: who owns the environment, PEP 668, spec rules."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from agent_env.errors import UserError
from agent_env.plugins import installer


def fake_prefix(tmp_path: Path, cfg: str | None, monkeypatch: pytest.MonkeyPatch) -> Path:
    prefix = tmp_path / "env"
    (prefix / "bin").mkdir(parents=True)
    if cfg is not None:
        (prefix / "pyvenv.cfg").write_text(cfg)
    monkeypatch.setattr(sys, "prefix", str(prefix))
    return prefix


def test_a_pip_made_venv_uses_pip(tmp_path, monkeypatch) -> None:
    fake_prefix(tmp_path, "home = /usr/bin\nversion = 3.11.7\n", monkeypatch)
    assert installer.installer_command() == [sys.executable, "-m", "pip"]


def test_a_uv_made_venv_uses_uv(tmp_path, monkeypatch) -> None:
    fake_prefix(tmp_path, "home = /usr/bin\nuv = 0.13.9\n", monkeypatch)
    monkeypatch.setattr(installer.shutil, "which", lambda name: "/opt/bin/uv")
    assert installer.installer_command() == ["/opt/bin/uv", "pip"]


def test_a_uv_tool_without_uv_on_path_says_so(tmp_path, monkeypatch) -> None:
    prefix = fake_prefix(tmp_path, "home = /usr/bin\n", monkeypatch)
    (prefix / "uv-receipt.toml").write_text("")
    monkeypatch.setattr(installer.shutil, "which", lambda name: None)
    monkeypatch.setattr(installer, "_venv_uv", lambda: None)
    with pytest.raises(UserError, match="managed by uv, but uv is not on PATH"):
        installer.installer_command()


def test_an_externally_managed_system_python_is_refused(tmp_path, monkeypatch) -> None:
    stdlib = tmp_path / "lib"
    stdlib.mkdir()
    (stdlib / "EXTERNALLY-MANAGED").write_text("[externally-managed]\n")
    monkeypatch.setattr(sys, "prefix", "/usr")
    monkeypatch.setattr(sys, "base_prefix", "/usr")
    monkeypatch.setattr(installer.sysconfig, "get_path", lambda name: str(stdlib))
    with pytest.raises(UserError) as info:
        installer.refuse_externally_managed()
    assert "externally managed Python (PEP 668)" in info.value.message
    assert "python3 -m venv .venv" in info.value.message


def test_a_venv_is_never_refused_for_pep_668(monkeypatch) -> None:
    monkeypatch.setattr(sys, "prefix", "/some/venv")
    monkeypatch.setattr(sys, "base_prefix", "/usr")
    installer.refuse_externally_managed()


@pytest.mark.parametrize("spec", ["agentenv-framework", "agentenv_framework>=0.1",
                                  "AgentEnv.Framework[aws]", "agentenv-framework-protocol"])
def test_specs_naming_the_core_are_refused(spec: str) -> None:
    with pytest.raises(UserError, match="is agent-env itself"):
        installer.resolve_specs([spec])


def test_a_first_party_short_name_resolves_to_its_folder_in_a_checkout() -> None:
    (resolved,) = installer.resolve_specs(["docker_env"])
    assert Path(resolved).name == "docker_env" and (Path(resolved) / "pyproject.toml").is_file()


def test_an_unbuilt_first_party_plugin_resolves_to_its_distribution(monkeypatch) -> None:
    monkeypatch.setattr(installer, "_checkout_root", lambda: None)
    assert installer.resolve_specs(["tensorlake"]) == ["agentenv-framework-tensorlake"]


def test_reinstall_specs_restore_what_was_there() -> None:
    editable = installer.Installed("x", "1.0", "file:///src/x", editable=True)
    assert editable.reinstall_spec() == ["-e", "/src/x"]
    assert installer.Installed("y", "2.1").reinstall_spec() == ["y==2.1"]
