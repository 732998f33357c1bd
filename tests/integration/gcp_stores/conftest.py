"""Session fixtures for the gcp_stores tests: the emulator, the fakes, a key and its token endpoint.

Nothing here is skipped: every service is started by the test session itself (the Cloud Storage
emulator is a test dependency of the plugin, the other services are fakes in ``gcp_fakes``).
The registry tests need Docker's ``docker-registry`` binary, which ``.ci/docker.sh`` installs;
without it they skip locally and fail under ``CI=true``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from gcp_fakes.gcs_proxy import GcsProxy, gcs_proxy
from gcp_fakes.http import LOOPBACK, free_port
from gcp_fakes.oauth import Authority, token_endpoint
from gcp_fakes.testbed import BUCKET, PROJECT, FirestoreServer


def _wait_http(url: str, process: subprocess.Popen[bytes], what: str, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=1):
                return
        except Exception:
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                output = process.stdout.read().decode(errors="replace") if process.stdout else ""
                raise RuntimeError(f"{what} did not start: {output[-2000:]}") from None
            time.sleep(0.1)


@pytest.fixture(scope="session")
def authority() -> Authority:
    """The service account whose key the tests use (its private key signs, its tokens work)."""
    return Authority(PROJECT)


@pytest.fixture(scope="session")
def key_file(authority: Authority, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A service-account key file whose ``token_uri`` is a local token endpoint."""
    path = tmp_path_factory.mktemp("gcp") / "service-account.json"
    with token_endpoint(authority, path):
        yield path


@pytest.fixture(scope="session")
def gcs_emulator() -> Iterator[str]:
    """``gcp-storage-emulator`` in memory on a free port, with the test bucket; yields its URL."""
    executable = shutil.which("gcp-storage-emulator") or str(
        Path(sys.executable).parent / "gcp-storage-emulator"
    )
    port = free_port()
    process = subprocess.Popen(
        [
            executable,
            "start",
            "--host",
            LOOPBACK,
            "--port",
            str(port),
            "--in-memory",
            "-q",
            "--default-bucket",
            BUCKET,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
    )
    url = f"http://{LOOPBACK}:{port}"
    try:
        _wait_http(url + "/", process, "gcp-storage-emulator")
        yield url
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()


@pytest.fixture(scope="session")
def gcs(gcs_emulator: str, authority: Authority, key_file: Path) -> Iterator[tuple[str, GcsProxy]]:
    """The emulator behind the precondition- and credential-checking proxy: ``(url, proxy)``."""
    with gcs_proxy(gcs_emulator, authority) as served:
        yield served


@pytest.fixture(scope="session")
def secret_manager_fake(authority: Authority, key_file: Path) -> Iterator[tuple[str, Any]]:
    """The Secret Manager fake: ``(endpoint, fake)``."""
    from gcp_fakes.secretmanager import secret_manager

    with secret_manager(authority) as served:
        yield served


@pytest.fixture(scope="session")
def firestore_server() -> Iterator[FirestoreServer]:
    """The fake Firestore in a child process, with ``FIRESTORE_EMULATOR_HOST`` pointing at it.

    A separate process keeps gRPC server threads out of the test process, which the conformance
    suite forks.
    """
    process = subprocess.Popen(
        [sys.executable, "-m", "gcp_fakes.firestore", "0"],
        cwd=Path(__file__).parent,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    port = json.loads(process.stdout.readline())["port"]
    host = f"{LOOPBACK}:{port}"
    old = os.environ.get("FIRESTORE_EMULATOR_HOST")
    os.environ["FIRESTORE_EMULATOR_HOST"] = host
    try:
        yield FirestoreServer(process, host)
    finally:
        if old is None:
            os.environ.pop("FIRESTORE_EMULATOR_HOST", None)
        else:
            os.environ["FIRESTORE_EMULATOR_HOST"] = old
        assert process.stdin is not None
        process.stdin.close()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()


@pytest.fixture(autouse=True)
def _logs_to_this_tests_stderr() -> None:
    """agent_env's structlog setup binds the stderr of its first use; pytest swaps stderr per
    test, so point the logs at the current one (else a later test logs to a closed file)."""
    from agent_env.logs import configure_logging

    configure_logging()
