"""Conformance suites every store backend must pass, one module per store kind.

Each module defines a class to subclass in your test module; provide the fixtures it names::

    from agent_env.testing.store_conformance.document import DocumentStoreSuite

    class TestDynamoDocuments(DocumentStoreSuite):
        @pytest.fixture
        def store(self, moto_server):
            return DynamoDocumentStore(table_prefix="t", endpoint_url=moto_server)

        @pytest.fixture
        def store_factory(self, moto_server):  # optional: a new client on the same data
            return lambda: DynamoDocumentStore(table_prefix="t", endpoint_url=moto_server)

Every test writes under its own random collection, key prefix or entity kind, so the suites can
run against a shared bucket or table. Tests that race several writers use threads with one
store per thread from ``store_factory``, and forked processes where ``fork`` exists (set
``FORK_SAFE = False`` on the subclass when the backend's client cannot be built after a fork).
"""

from __future__ import annotations

import multiprocessing
import sys
import traceback
from collections.abc import Callable
from typing import Any


def run_in_processes(target: Callable[[int], Any], count: int, timeout: float = 60.0) -> None:
    """Run ``target(i)`` in ``count`` forked processes at once; fail if any of them failed."""
    context = multiprocessing.get_context("fork")
    barrier = context.Barrier(count)

    def child(index: int) -> None:
        try:
            barrier.wait(timeout)
            target(index)
        except BaseException:
            traceback.print_exc()
            sys.stderr.flush()
            raise SystemExit(1) from None

    processes = [context.Process(target=child, args=(i,)) for i in range(count)]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout)
    failed = [p.exitcode for p in processes if p.exitcode != 0]
    for process in processes:
        if process.is_alive():
            process.kill()
    assert not failed, f"{len(failed)} of {count} writer processes failed (exit codes {failed})"


def fork_available() -> bool:
    return "fork" in multiprocessing.get_all_start_methods()
