"""One SDK client per running event loop, closed when that loop shuts down.

Why: a cloud provider's SDK client holds an HTTP session bound to the event loop that made it,
and the CLI runs several loops one after another (``asyncio.run`` per phase). A provider that
kept one client would use it on a dead loop; one that never closed it would print "Unclosed
client session" at exit. :class:`LoopClient` makes a client on first use in each loop and
closes it as that loop shuts down: an async generator the loop knows of is closed by
``asyncio.run``'s ``shutdown_asyncgens``, and its ``finally`` closes the client.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class LoopClient(Generic[T]):
    """``await clients.get()``: this loop's client, made by ``make`` and closed by ``close``."""

    def __init__(self, make: Callable[[], T | Awaitable[T]],
                 close: Callable[[T], Awaitable[object]]) -> None:
        self.make = make
        self.close = close
        self.current: T | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closer: AsyncGenerator[None, None] | None = None

    async def get(self) -> T:
        loop = asyncio.get_running_loop()
        if self.current is None or self._loop is not loop:
            made = self.make()
            # An SDK whose client connects as it is made (Modal's) makes it asynchronously.
            client: T = await made if inspect.isawaitable(made) else made
            if self.current is not None and self._loop is loop:  # another caller won the race
                await self.close(client)
                return self.current
            closer = self._close_at_shutdown(client)
            await closer.__anext__()  # started: the loop now closes it when it shuts down
            self.current, self._loop, self._closer = client, loop, closer
        return self.current

    async def _close_at_shutdown(self, client: T) -> AsyncGenerator[None, None]:
        try:
            yield  # resumed by nothing: only closing the generator ends it
        finally:
            with contextlib.suppress(Exception):  # a best-effort close of a finished loop
                await self.close(client)
