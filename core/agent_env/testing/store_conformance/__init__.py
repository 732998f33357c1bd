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
store per thread from ``store_factory``, and separate processes. The processes are spawned, not
forked (a fork of the multi-threaded test process can inherit a lock another thread held and
hang), so ``store_factory`` must pickle: return ``functools.partial(YourStore, **settings)``,
not a lambda.
"""

from __future__ import annotations

import multiprocessing
import pickle
import sys
import traceback
from collections.abc import Callable
from typing import Any

import pytest


def run_in_processes(target: Callable[[int], Any], count: int, timeout: float = 60.0) -> None:
    """Run ``target(i)`` in ``count`` spawned processes at once; fail if any of them failed.

    ``target`` must pickle: a module-level function, or a ``functools.partial`` of one.
    """
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(count)
    processes = [
        context.Process(target=_child, args=(barrier, target, i, timeout)) for i in range(count)
    ]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout)
    failed = [p.exitcode for p in processes if p.exitcode != 0]
    for process in processes:
        if process.is_alive():
            process.kill()
    assert not failed, f"{len(failed)} of {count} writer processes failed (exit codes {failed})"


def _child(barrier: Any, target: Callable[[int], Any], index: int, timeout: float) -> None:
    try:
        barrier.wait(timeout)
        target(index)
    except BaseException:
        traceback.print_exc()
        sys.stderr.flush()
        raise SystemExit(1) from None


def skip_unless_it_pickles(factory: Callable[[], Any]) -> None:
    """Skip a process test whose store factory cannot reach a spawned process, saying how."""
    try:
        pickle.dumps(factory)
    except Exception:
        pytest.skip("store_factory does not pickle: return functools.partial(Store, **settings)")
