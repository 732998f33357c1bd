"""Teardown: everything a run brought up, taken down by the caller, always, never raising.

Steps register what they start (a sandbox, a deployed env, a gateway) with a close function.
The caller of a run (``agent-env run``, ``task run``, an episode) calls :meth:`Teardown.run` in
a ``finally``; the report says what was terminated and what could not be, so a leak is visible.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import attrs

from agent_env.errors import cause

Close = Callable[[], Awaitable[None]]
#: Whether a thing is already down (a sandbox its provider no longer finds).
Probe = Callable[[], Awaitable[bool]]


@attrs.define
class TeardownItem:
    """One thing to take down: ``kind`` (``sandbox``, ``env``...) and a label for people."""

    kind: str
    label: str
    close: Close = attrs.field(repr=False)
    done: bool = False
    error: str | None = None
    #: asked after a stopped teardown, so that what is gone is not listed as still up
    gone: Probe | None = attrs.field(default=None, repr=False)


@attrs.frozen
class Endpoint:
    """An address a run serves while it is up (an env's gateway, an agent, a model gateway).

    ``agent-env run --keep`` prints every one with its token, so a person can use what is held
    up; records never carry the token.
    """

    label: str
    url: str
    token: str | None = attrs.field(default=None, repr=False)


@attrs.frozen
class TeardownReport:
    terminated: tuple[TeardownItem, ...] = ()
    failed: tuple[TeardownItem, ...] = ()

    def count(self, kind: str) -> int:
        return sum(1 for item in self.terminated if item.kind == kind)




class Teardown:
    """The registry of what is up. Shared by the tasks of one ``agent-env run``."""

    def __init__(self, *, timeout_per_item: float = 120.0) -> None:
        self.items: list[TeardownItem] = []
        self.timeout_per_item = timeout_per_item
        #: What the runs serve while up, in the order they came up (see :class:`Endpoint`).
        self.endpoints: list[Endpoint] = []

    def register(self, kind: str, label: str, close: Close,
                 gone: Probe | None = None) -> TeardownItem:
        item = TeardownItem(kind, label, close, gone=gone)
        self.items.append(item)
        return item

    async def recheck(self, timeout: float = 5.0) -> None:
        """After a stopped teardown: mark done what is down already (the item being closed
        when the stop came may have finished its work), asking each probe side by side for
        at most ``timeout`` seconds; what cannot be asked stays listed."""
        import asyncio

        async def ask(item: TeardownItem) -> None:
            assert item.gone is not None
            try:
                if await item.gone():
                    item.done, item.error = True, None
            except Exception:  # a probe for a message: the item stays listed
                pass

        waiting = [ask(i) for i in self.still_up() if i.gone is not None]
        if waiting:
            await asyncio.wait([asyncio.ensure_future(w) for w in waiting], timeout=timeout)

    def still_up(self) -> list[TeardownItem]:
        return [item for item in self.items if not item.done]

    async def close(self, item: TeardownItem) -> bool:
        """Take one item down now (``teardown_sandboxes`` does); False if it failed."""
        import asyncio

        if item.done:
            return True
        try:
            await asyncio.wait_for(item.close(), self.timeout_per_item)
        except asyncio.CancelledError:
            item.error = "teardown stopped"
            raise
        except Exception as exc:
            item.error = cause(exc)
            return False
        item.done, item.error = True, None
        return True

    async def run(self) -> TeardownReport:
        """Take down everything still up, newest first; never raises (except cancellation)."""
        for item in reversed(self.still_up()):
            await self.close(item)
        return self.report()

    def report(self) -> TeardownReport:
        return TeardownReport(
            tuple(item for item in self.items if item.done),
            tuple(item for item in self.items if not item.done),
        )
