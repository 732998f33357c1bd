"""Issue 31, class 18: a second Ctrl-C stops the teardown and lists what is still up; a thing
whose teardown had finished its work (or that is gone for another reason) is not listed."""

from __future__ import annotations

import asyncio

from agent_env.tasks.teardown import Teardown


async def test_a_stopped_teardown_lists_only_what_is_still_up() -> None:
    teardown = Teardown()
    state = {"a": True, "b": True, "c": True}

    async def hang(name: str) -> None:
        state[name] = False  # its work is done...
        await asyncio.sleep(3600)  # ...but the call never returned before the stop

    async def down(name: str) -> bool:
        return not state[name]

    async def unknown() -> bool:
        raise RuntimeError("the provider cannot be asked")

    teardown.register("sandbox", "sandbox a", lambda: asyncio.sleep(3600), unknown)
    teardown.register("sandbox", "sandbox b", lambda: asyncio.sleep(3600), lambda: down("b"))
    teardown.register("sandbox", "sandbox c", lambda: hang("c"), lambda: down("c"))
    running = asyncio.ensure_future(teardown.run())  # newest first: c is being closed
    await asyncio.sleep(0.05)
    running.cancel()  # the second Ctrl-C
    try:
        await running
    except asyncio.CancelledError:
        pass
    state["b"] = False  # b went away meanwhile (its provider removed it)
    await teardown.recheck(timeout=2)
    assert [item.label for item in teardown.report().failed] == ["sandbox a"]
    assert sorted(item.label for item in teardown.report().terminated) == ["sandbox b",
                                                                           "sandbox c"]
