"""The one client holder all four AWS stores use (``agentenv_aws_stores.aws.AwsClient``).

Why these tests: the stores' client set-ups had drifted (only DynamoDB rebuilt its client after a
fork, Secrets Manager built it without a lock). Each store is checked here for the same three
behaviours, on moto: threads asking at once share one client built once; a forked child builds
its own and uses it; a lock held by another thread at fork time does not hang the child.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from agentenv_aws_stores.aws import AwsSettings
from agentenv_aws_stores.dynamodb import DynamoDocumentStore
from agentenv_aws_stores.ecr import EcrImageStore
from agentenv_aws_stores.s3 import S3ObjectStore
from agentenv_aws_stores.secretsmanager import SecretsManagerSecretStore

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")

#: kind -> (make the store, use its client for real: what a forked worker would do first)
Make = Callable[[dict[str, Any], str, Any], Any]


def _s3(aws: dict[str, Any], name: str, boto: Any) -> S3ObjectStore:
    return S3ObjectStore(bucket=name, create_bucket=True, **aws)


def _dynamodb(aws: dict[str, Any], name: str, boto: Any) -> DynamoDocumentStore:
    return DynamoDocumentStore(table=name, create_table=True, **aws)


def _secrets(aws: dict[str, Any], name: str, boto: Any) -> SecretsManagerSecretStore:
    boto("secretsmanager").create_secret(Name=name, SecretString='{"token": "t"}')
    return SecretsManagerSecretStore(secret_id=name, ttl=0, **aws)


def _ecr(aws: dict[str, Any], name: str, boto: Any) -> EcrImageStore:
    return EcrImageStore(prefix=name, **aws)


STORES: dict[str, tuple[Make, Callable[[Any], Any]]] = {
    "s3": (_s3, lambda store: store.list("")),
    "dynamodb": (_dynamodb, lambda store: store.count("things")),
    "secretsmanager": (_secrets, lambda store: store.get("token")),
    "ecr": (_ecr, lambda store: store.ensure_repository("repo")),
}


@pytest.fixture(params=sorted(STORES))
def store_and_use(request: pytest.FixtureRequest, aws: dict[str, Any], unique_name: str,
                  boto: Any) -> tuple[Any, Callable[[Any], Any]]:
    make, use = STORES[request.param]
    store = make(aws, unique_name, boto)
    yield store, use
    store.close()


def _in_child(work: Callable[[], dict[str, Any]], seconds: int = 60) -> dict[str, Any]:
    """Run ``work`` in a forked child; its JSON answer (or the error it hit)."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never return into pytest
        code = 0
        try:
            signal.alarm(seconds)  # a hung lock must fail the test, not hang it
            answer = work()
        except BaseException as exc:
            answer, code = {"error": f"{type(exc).__name__}: {exc}"}, 1
        os.write(write, json.dumps(answer).encode())
        os._exit(code)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        data = pipe.read()
    os.waitpid(pid, 0)
    return json.loads(data or b'{"error": "the child died without answering"}')


def test_threads_asking_at_once_share_one_client_built_once(
    store_and_use: tuple[Any, Callable[[Any], Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    store, use = store_and_use
    built: list[str] = []
    real = AwsSettings.client

    def slow_client(self: AwsSettings, service: str, **config: Any) -> Any:
        built.append(service)
        time.sleep(0.2)  # widen the window two unlocked builders would both get through
        return real(self, service, **config)

    monkeypatch.setattr(AwsSettings, "client", slow_client)
    start = threading.Barrier(8)
    clients: list[Any] = []

    def ask() -> None:
        start.wait()
        clients.append(store.client)

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(built) == 1
    assert len(clients) == 8 and all(c is clients[0] for c in clients)
    use(store)  # the one client works


def test_a_forked_child_builds_its_own_client_and_uses_it(
    store_and_use: tuple[Any, Callable[[Any], Any]],
) -> None:
    store, use = store_and_use
    use(store)
    parent = store.client

    def child() -> dict[str, Any]:
        mine = store.client
        use(store)
        return {"same": mine is parent, "again": store.client is mine}

    assert _in_child(child) == {"same": False, "again": True}
    assert store.client is parent  # the parent keeps its own, still working
    use(store)


def test_a_lock_held_by_another_thread_at_fork_does_not_hang_the_child(
    store_and_use: tuple[Any, Callable[[Any], Any]],
) -> None:
    store, use = store_and_use
    holder = store._clients
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with holder._lock:
            held.set()
            release.wait(30)

    thread = threading.Thread(target=hold)
    thread.start()
    held.wait(10)
    try:
        answer = _in_child(lambda: {"used": use(store) is None or True}, seconds=30)
    finally:
        release.set()
        thread.join()
    assert answer == {"used": True}
