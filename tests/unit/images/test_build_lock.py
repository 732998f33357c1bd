"""One build per image tag at a time in a process: the second caller waits for the first (then
finds its image), and a stopped caller (Ctrl-C) stops waiting at once."""

from __future__ import annotations

import threading
import time

import pytest

from agentenv_docker_env.build import BuildStopped, _building


def test_builds_of_one_tag_take_turns_and_other_tags_do_not_wait() -> None:
    order: list[str] = []

    def build(name: str, tag: str, seconds: float) -> None:
        with _building(tag, None):
            order.append(f"{name} in")
            time.sleep(seconds)
            order.append(f"{name} out")

    first = threading.Thread(target=build, args=("a", "agentenv/x:1", 0.3))
    first.start()
    time.sleep(0.05)
    second = threading.Thread(target=build, args=("b", "agentenv/x:1", 0))
    other = threading.Thread(target=build, args=("c", "agentenv/y:1", 0))
    second.start()
    other.start()
    for thread in (first, second, other):
        thread.join()
    assert order.index("b in") > order.index("a out")  # waited for the same tag
    assert order.index("c in") < order.index("a out")  # another tag did not


def test_a_stopped_caller_stops_waiting() -> None:
    held = threading.Event()
    release = threading.Event()

    def hold() -> None:
        with _building("agentenv/z:1", None):
            held.set()
            release.wait(5)

    holder = threading.Thread(target=hold)
    holder.start()
    held.wait(5)
    stop = threading.Event()
    stop.set()
    with pytest.raises(BuildStopped, match="waiting for another build of agentenv/z:1"):
        with _building("agentenv/z:1", stop):
            pass
    release.set()
    holder.join()
