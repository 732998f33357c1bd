"""LoopClient: one SDK client per event loop, closed as that loop shuts down."""

from __future__ import annotations

import asyncio

from agent_env.api import LoopClient


class Client:
    """A stand-in SDK client that records whether it was closed."""

    def __init__(self) -> None:
        self.closed = False

    async def close(self) -> None:
        self.closed = True


def test_one_client_per_loop_each_closed_when_its_loop_ends() -> None:
    made: list[Client] = []

    def make() -> Client:
        made.append(Client())
        return made[-1]

    async def close(client: Client) -> None:
        await client.close()

    clients: LoopClient[Client] = LoopClient(make, close)

    async def use() -> Client:
        first = await clients.get()
        assert await clients.get() is first  # reused within the loop
        assert not first.closed
        return first

    one = asyncio.run(use())
    assert one.closed  # asyncio.run's shutdown closed it
    two = asyncio.run(use())
    assert two is not one and two.closed
    assert made == [one, two]


def test_an_async_make_is_awaited_and_a_racing_second_client_is_closed() -> None:
    made: list[Client] = []

    async def make() -> Client:  # an SDK whose client connects as it is made
        client = Client()
        made.append(client)
        await asyncio.sleep(0.01)
        return client

    clients: LoopClient[Client] = LoopClient(make, Client.close)

    async def use() -> tuple[Client, Client]:
        first, second = await asyncio.gather(clients.get(), clients.get())
        return first, second

    first, second = asyncio.run(use())
    assert first is second  # both callers got the one kept client
    assert len(made) == 2 and all(client.closed for client in made)  # the extra closed at once
