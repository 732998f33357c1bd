"""The project files the README names exist and are true of the code.

``.agentenv/config.example.toml`` is the all-local configuration: loading it changes nothing
and every table in it is accepted by what it configures. ``.env.example`` lists exactly the
``AGENT_ENV_*`` variables the code reads.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from agent_env import config
from agent_env.config import DEFAULT_STORES, load_config
from agent_env.runtime import Runtime, use

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE_CONFIG = ROOT / ".agentenv" / "config.example.toml"
ENV_EXAMPLE = ROOT / ".env.example"

#: AGENT_ENV_* names the code writes for others (into agent containers) and never reads; the
#: CLI build_mcp_cli generates reads the gateway and its timeout inside the agent's container.
SET_NOT_READ = {"AGENT_ENV_ROLE", "AGENT_ENV_GATEWAY_URL", "AGENT_ENV_CLI_TIMEOUT"}


@pytest.mark.parametrize("name", [
    "LICENSE", "NOTICE", "CONTRIBUTING.md", "AGENTS.md", "SECURITY.md", "CODE_OF_CONDUCT.md",
    "CITATION.cff", ".agentenv/config.example.toml", ".env.example", "THIRD_PARTY_NOTICES.md",
])
def test_the_project_file_exists(name: str) -> None:
    assert (ROOT / name).is_file()


def test_the_license_is_apache_2() -> None:
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text


def test_the_example_config_is_the_all_local_default(state_root: Path) -> None:
    loaded = load_config(EXAMPLE_CONFIG, environ={})
    assert loaded.warnings == ()
    for kind, backend in DEFAULT_STORES.items():
        assert loaded.store(kind).backend == backend
    assert loaded.sandbox_chain() == ["local"]
    assert loaded.section("model") == {} and loaded.section("agents") == {}
    # every section the code knows is shown (a table header, live or commented)
    text = EXAMPLE_CONFIG.read_text(encoding="utf-8")
    for section in config.KNOWN_KEYS:
        assert re.search(rf"^#? ?\[{section}[\].]", text, re.MULTILINE), section


def test_every_table_of_the_example_config_is_accepted(state_root: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_ENV_CONFIG", str(EXAMPLE_CONFIG))
    runtime = Runtime()
    with use(runtime):
        assert runtime.host.unknown_tables == []  # each plugin checked its table
        for kind in DEFAULT_STORES:
            if kind != "image":  # the image store needs a Docker engine; its table is empty
                assert runtime.store(kind) is not None
        for provider in ("local", "docker"):
            assert runtime.provider(provider).name == provider


def _read_variables() -> set[str]:
    found: set[str] = set()
    for folder in ("core", "plugins", "protocol"):
        for path in (ROOT / folder).rglob("*.py"):
            found.update(re.findall(r"[\"'](AGENT_ENV_[A-Z][A-Z0-9_]*)[\"']",
                                    path.read_text(encoding="utf-8")))
    return found - SET_NOT_READ


def test_the_env_example_lists_exactly_the_variables_the_code_reads() -> None:
    read = _read_variables()
    assert set(config.ENV_VARIABLES) <= read  # the scan sees the config's own table
    listed = set(re.findall(r"^# (AGENT_ENV_[A-Z0-9_]+)=", ENV_EXAMPLE.read_text(encoding="utf-8"),
                            re.MULTILINE))
    assert listed == read, (f"undocumented: {sorted(read - listed)}; "
                            f"read by nothing: {sorted(listed - read)}")


def test_every_file_the_readme_links_to_exists() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    links = [target for target in re.findall(r"\]\(([^)#\s]+)\)", readme)
             if "://" not in target]
    assert "CONTRIBUTING.md" in links and ".env.example" in links
    for target in links:
        assert (ROOT / target).exists(), f"README links to {target}, which does not exist"


def test_agents_md_names_every_hook() -> None:
    from agent_env import hookspecs

    text = (ROOT / "AGENTS.md").read_text(encoding="utf-8")
    for name in vars(hookspecs):
        if name.startswith("agent_env_"):
            assert f"`{name}`" in text, f"AGENTS.md does not name the hook {name}"
