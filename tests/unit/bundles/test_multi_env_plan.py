"""A ``multi`` env in a bundle: its env.toml checked at preflight (its own keys, the children it
names), and its children stored with it though no step names them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agent_env.bundles.ledger import Ledger
from agent_env.bundles.parse import parse_bundle
from agent_env.bundles.plan import PreflightFailed, plan_bundle
from agent_env.stores.filesystem import FilesystemObjectStore
from agent_env.stores.sqlite import SqliteDocumentStore
from agent_env.stores.versioned import VersionedStore

SERVER = 'from agentenv_protocol import environment_card\n@environment_card(name="{name}")\n'


def bundle(tmp_path: Path, multi_toml: str, envs: tuple[str, ...] = ("a", "b")) -> Path:
    folder = tmp_path / "b"
    for name in envs:
        (folder / "envs" / name).mkdir(parents=True)
        (folder / "envs" / name / "Dockerfile").write_text("FROM python:3.11-slim\n")
        (folder / "envs" / name / "server.py").write_text(SERVER.format(name=name))
    (folder / "envs" / "both").mkdir(parents=True)
    (folder / "envs" / "both" / "env.toml").write_text(multi_toml)
    (folder / "tasks").mkdir()
    (folder / "tasks" / "t.json").write_text(json.dumps([
        {"id": "deploy", "type": "deploy_env", "env_id": "both"}]))
    return folder


def problems(tmp_path: Path, multi_toml: str, **kw: Any) -> list[str]:
    parsed, found = parse_bundle(bundle(tmp_path, multi_toml, **kw), "@local/b")
    with pytest.raises(PreflightFailed) as caught:
        plan_bundle(parsed, parse_problems=found)
    return caught.value.problems


def test_a_good_multi_env_stores_its_children_with_it(tmp_path: Path, state_root: Any) -> None:
    parsed, found = parse_bundle(bundle(tmp_path, 'type = "multi"\nname = "pair"\n'
                                                  'mcp_server_envs = ["a", "b"]\n'), "@local/b")
    plan = plan_bundle(parsed, parse_problems=found)
    documents = SqliteDocumentStore(tmp_path / "docs.sqlite3")
    stores = VersionedStore(documents), FilesystemObjectStore(tmp_path / "o", fsync=False)
    lines = [str(x) for x in Ledger(*stores).write_plan(plan).lines]
    assert lines == ["envs/a: v1 (new)", "envs/b: v1 (new)", "envs/both: v1 (new)",
                     "tasks/t.json: v1 (new)"]
    stored = stores[0].get("envs", "@local/b/both")
    assert stored.body["settings"] == {"name": "pair", "mcp_server_envs": ["a", "b"]}
    documents.close()


def test_what_a_multi_env_toml_gets_wrong_is_named_at_preflight(
        tmp_path: Path, state_root: Any) -> None:
    found = problems(tmp_path, 'type = "multi"\nmcp_server_envs = ["a", "nope", "a"]\n'
                               'website_envs = ["site"]\nenv_provider_type = "modal"\n'
                               'colour = "red"\n')
    where = "envs/both/env.toml"
    assert found == [
        f"{where}: unknown key(s) colour (a multi env takes: mcp_server_envs, service_envs, "
        "website_envs, name, env_provider_type, network_policy, environment_name, id, type)",
        f"{where}: env_provider_type 'modal': a multi env deploys through the gateway here "
        "('gateway')",
        f"{where}: mcp_server_envs names an env twice",
        f"{where}: mcp_server_envs names 'nope', which is not an env of this bundle (its "
        "mcp_server envs: a, b)",
        f"{where}: website_envs names 'site', not an env of this bundle (its website envs: "
        "none)",
    ]


def test_a_multi_env_cannot_hold_another_or_nothing(tmp_path: Path, state_root: Any) -> None:
    assert problems(tmp_path, 'type = "multi"\nmcp_server_envs = ["both"]\n') == [
        "envs/both/env.toml: mcp_server_envs names 'both', an env of type 'multi'; a multi "
        "env's children are 'mcp_server' envs (a multi env cannot hold another)"]
    assert problems(tmp_path / "2", 'type = "multi"\nmcp_server_envs = []\n') == [
        "envs/both/env.toml: mcp_server_envs must list the envs it deploys (names of the "
        "bundle's envs, or stored env ids): [\"a\", \"b\"]"]


def test_an_mcp_server_env_still_refuses_keys_of_its_own(
        tmp_path: Path, state_root: Any) -> None:
    folder = bundle(tmp_path, 'type = "multi"\nmcp_server_envs = ["a"]\n')
    (folder / "envs" / "a" / "env.toml").write_text('mcp_server_envs = ["b"]\n')
    assert problems_of(folder) == [
        "envs/a/env.toml: unknown key(s) mcp_server_envs (an env of type 'mcp_server' takes: "
        "environment_name, id, image, network_policy, type)"]


def test_network_policy_is_an_env_toml_key_checked_at_preflight(
        tmp_path: Path, state_root: Any) -> None:
    folder = bundle(tmp_path, 'type = "multi"\nmcp_server_envs = ["a"]\n'
                              'network_policy = "registries"\n')
    (folder / "envs" / "a" / "env.toml").write_text('network_policy = "everywhere"\n')
    found = " | ".join(problems_of(folder))
    assert ("envs/a/env.toml: network_policy must be one of none, open, not 'everywhere'"
            in found)
    assert ("envs/both/env.toml: network_policy must be one of none, open, not 'registries': "
            "an allow-list of package hosts needs a filtering proxy, not here yet") in found


def service(folder: Path, name: str, toml: str) -> None:
    (folder / "envs" / name).mkdir(parents=True)
    (folder / "envs" / name / "env.toml").write_text('type = "service"\n' + toml)


def test_service_envs_are_stored_with_the_multi_env_and_checked(
        tmp_path: Path, state_root: Any) -> None:
    folder = bundle(tmp_path, 'type = "multi"\nmcp_server_envs = ["a"]\n'
                              'service_envs = ["db", "cache"]\n')
    service(folder, "db", 'image = "postgres:16"\nvolumes = ["pg:/var/lib/postgresql"]\n'
                          '[healthcheck]\ntest = "pg_isready"\ninterval = "1m30s"\n')
    service(folder, "cache", 'image = "redis"\ncommand = "redis-server --save \'\'"\n')
    parsed, found = parse_bundle(folder, "@local/b")
    plan = plan_bundle(parsed, parse_problems=found)
    documents = SqliteDocumentStore(tmp_path / "docs.sqlite3")
    stores = VersionedStore(documents), FilesystemObjectStore(tmp_path / "o", fsync=False)
    lines = [str(x) for x in Ledger(*stores).write_plan(plan).lines]
    assert "envs/db: v1 (new)" in lines and "envs/cache: v1 (new)" in lines
    documents.close()

    from agentenv_mcp_env.service import service_settings

    settings = service_settings("db", {"volumes": ["pg:/data:ro"], "healthcheck": {
        "test": "pg_isready", "interval": "1m30s", "timeout": 2, "retries": 9}}, "db")
    assert (settings.name, settings.volumes[0].read_only) == ("db", True)
    check = settings.healthcheck
    assert check is not None
    assert (check.test, check.interval, check.timeout, check.retries) == (
        ("CMD-SHELL", "pg_isready"), 90.0, 2.0, 9)


@pytest.mark.parametrize(("toml", "error"), [
    ('volumes = ["/srv:/data"]\n', "'/srv' is not a volume name (a host path cannot be mounted"),
    ('name = "gateway"\n', "name 'gateway' is not a host name a service can take"),
    ('[healthcheck]\ntest = ["CMD"]\n', 'healthcheck.test must be ["CMD", argv...]'),
    ('[healthcheck]\ntest = "x"\ninterval = "soon"\n', "healthcheck.interval must be a duration"),
    ('ports = ["http"]\n', "ports must be a list of port numbers"),
    ('privileged = true\n', "unknown key(s) privileged (a service env takes:"),
])
def test_what_a_service_env_toml_gets_wrong_is_named_at_preflight(
        tmp_path: Path, state_root: Any, toml: str, error: str) -> None:
    folder = bundle(tmp_path, 'type = "multi"\nmcp_server_envs = ["a"]\nservice_envs = ["db"]\n')
    service(folder, "db", toml)
    parsed, found = parse_bundle(folder, "@local/b")
    with pytest.raises(PreflightFailed) as caught:
        plan_bundle(parsed, parse_problems=found)
    assert any(error in p for p in caught.value.problems), caught.value.problems


def test_service_envs_must_name_service_envs_with_distinct_names(
        tmp_path: Path, state_root: Any) -> None:
    folder = bundle(tmp_path, 'type = "multi"\nmcp_server_envs = ["a"]\n'
                              'service_envs = ["b", "nope", "db1", "db2"]\n')
    service(folder, "db1", 'name = "db"\nimage = "x"\n')
    service(folder, "db2", 'name = "db"\nimage = "x"\n')
    found = " | ".join(problems_of(folder))
    assert "service_envs names 'b', an env of type 'mcp_server' (its service envs: db1, db2)" \
        in found
    assert "service_envs names 'nope', not an env of this bundle" in found
    assert "service_envs 'db1' and 'db2' are both named 'db' on the env's network" in found


def problems_of(folder: Path) -> list[str]:
    parsed, found = parse_bundle(folder, "@local/b")
    with pytest.raises(PreflightFailed) as caught:
        plan_bundle(parsed, parse_problems=found)
    return caught.value.problems
