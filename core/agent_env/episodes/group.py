"""``EpisodeGroup``: n episodes of one spec started from copies of one warmed env (GRPO groups).

Made by :meth:`EpisodeSpec.start_group`; how each member gets its copy is :mod:`.fork`. The
members are ordinary episodes (``group.episodes``: turns, ``result()``, ``abandon()``), so a
trainer plays them as it plays any other. ``await group.results()`` answers their scores in
member order once every member is torn down and the group's committed images are removed.
"""

from __future__ import annotations

import asyncio
from types import TracebackType
from typing import TYPE_CHECKING, Any

from agent_env.episodes.fork import Forks, Warm

if TYPE_CHECKING:
    from agent_env.episodes.episode import Episode
    from agent_env.episodes.spec import EpisodeSpec


class EpisodeGroup:
    """Episodes forked from one warmed env; see the module docstring."""

    def __init__(self, spec: EpisodeSpec, group_id: str, warm: Warm | None, fork: str) -> None:
        self.id = group_id
        self.spec = spec
        self.forks = Forks(group_id, spec.labels, warm, fork)
        #: The members, in the order they were started.
        self.episodes: list[Episode] = []
        self._done: asyncio.Future[None] | None = None
        self.closed = False

    def __repr__(self) -> str:
        return f"<EpisodeGroup {self.id}: {len(self.episodes)} episodes, {self.how or 'unforked'}>"

    @property
    def how(self) -> dict[str, str]:
        """``{deploy_env step id: "data-plane" | "image-commit"}``, once each origin is up."""
        return self.forks.how()

    def member_finished(self) -> None:
        """A member's teardown ran; after the last, the group's own things go (its images)."""
        if self._done is None and all(e.state == "finished" for e in self.episodes):
            self._done = asyncio.ensure_future(self.forks.close())

    async def results(self, *, return_exceptions: bool = False) -> list[Any]:
        """Every member's ``{step_id: score}``, in member order, once all of them (and the
        group's committed images) are gone. A member's error is raised, or with
        ``return_exceptions`` answered in its place (as :func:`asyncio.gather` does)."""
        found = await asyncio.gather(*(e.result() for e in self.episodes),
                                     return_exceptions=True)
        await self._cleaned_up()
        if not return_exceptions:
            for outcome in found:
                if isinstance(outcome, BaseException):
                    raise outcome
        return list(found)

    async def _cleaned_up(self) -> None:
        self.member_finished()
        if self._done is not None:
            await asyncio.shield(self._done)

    async def close(self) -> None:
        """Abandon the members still running, then remove what the group made."""
        self.closed = True
        await asyncio.gather(*(e.abandon("the episode group was closed") for e in self.episodes),
                             return_exceptions=True)
        self.member_finished()
        if self._done is None:  # a member never started: nothing waits on the group
            self._done = asyncio.ensure_future(self.forks.close())
        await asyncio.shield(self._done)

    async def __aenter__(self) -> EpisodeGroup:
        return self

    async def __aexit__(self, et: type[BaseException] | None, e: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()
