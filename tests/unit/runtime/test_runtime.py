"""One runtime per configuration: no module state, two configs side by side in one process."""

from __future__ import annotations

import asyncio
from pathlib import Path

from agent_env import runtime
from agent_env.runtime import Runtime, current, use


def test_two_runtimes_keep_their_own_config_and_stores(tmp_path: Path) -> None:
    one, two = Runtime(), Runtime()
    one.configure(stores={"object": {"backend": "filesystem", "path": str(tmp_path / "a")}})
    two.configure(stores={"object": {"backend": "filesystem", "path": str(tmp_path / "b")}})
    with use(one):
        current().object_store.put("k", b"one")
        with use(two):
            current().object_store.put("k", b"two")
            assert runtime.current().config is two.config
        assert current().object_store.get("k") == b"one"
    assert (tmp_path / "a").is_dir() and (tmp_path / "b").is_dir()
    assert two.store("object").get("k") == b"two"
    assert current() is not one and current() is not two


def test_asyncio_tasks_started_under_a_runtime_keep_it(tmp_path: Path) -> None:
    other = Runtime()
    other.configure(state={"root": str(tmp_path / "other")})

    async def where() -> Path:
        await asyncio.sleep(0)
        return current().config.state_root

    async def main() -> tuple[Path, Path]:
        with use(other):
            task = asyncio.ensure_future(where())
        return await task, current().config.state_root

    inside, outside = asyncio.run(main())
    assert inside == tmp_path / "other" and outside != inside


def test_configure_closes_what_the_old_config_built(tmp_path: Path) -> None:
    rt = Runtime()
    rt.configure(state={"root": str(tmp_path / "first")})
    first = rt.store("document")
    rt.configure(state={"root": str(tmp_path / "second")})
    second = rt.store("document")
    assert second is not first and second.path.parent == tmp_path / "second"


def test_reset_forgets_the_default_runtime_and_its_overrides(state_root: Path) -> None:
    runtime.configure(stores={"document": "nosuch"})
    before = current()
    assert before.config.store("document").backend == "nosuch"
    runtime.reset()
    assert current() is not before
    assert current().config.store("document").backend == "sqlite"
    assert current().document_store.path.parent == state_root


def test_a_provider_without_its_own_from_config_is_checked_against_its_constructor() -> None:
    from agent_env.errors import ConfigError

    rt = Runtime()
    rt.configure(sandbox={"providers": {"local": {"config": {"bogus": 1}}}})
    try:
        rt.provider("local")
    except ConfigError as exc:
        assert exc.message.startswith(
            "[sandbox.providers.local.config] has unknown setting(s) bogus for the 'local' "
            "sandbox provider (known: ")
    else:
        raise AssertionError("an unknown key of the local provider was accepted")


def test_plugin_state_lives_in_its_runtime_and_reset_forgets_it(tmp_path: Path) -> None:
    """What plugins keep between calls (the explorer's event publisher, the model scripts of
    a run...) is runtime state: another runtime has its own, and reset() drops the default's."""
    from agentenv_explorer.live import publisher

    first = publisher()
    assert publisher() is first
    other = Runtime()
    other.configure(state={"root": str(tmp_path / "other")})
    with use(other):
        assert publisher() is not first
        assert publisher().folder == tmp_path / "other" / "explorer"
    runtime.reset()
    assert publisher() is not first
