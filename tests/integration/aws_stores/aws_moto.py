"""Helpers for the AWS store tests: the moto server process and fault-injecting botocore hooks.

Kept out of conftest.py so test modules can import them (``from aws_moto import ...``).
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

REGION = "us-east-1"
#: moto accepts any key; real-looking ones keep botocore's validation quiet.
CREDENTIALS = {"access_key_id": "AKIATESTTESTTESTTEST", "secret_access_key": "test-secret"}
INSTALL = "pip install -e 'plugins/aws_stores[test]'"


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _moto_command() -> list[str]:
    """``moto_server`` as this Python runs it, one request at a time (see moto_serial_server)."""
    import importlib.util

    if importlib.util.find_spec("moto.server") is None or importlib.util.find_spec("flask") is None:
        raise FileNotFoundError(f"moto[server] is not installed ({INSTALL})")
    return [sys.executable, str(Path(__file__).with_name("moto_serial_server.py"))]


def _die_with_parent() -> None:
    """Linux: the emulator gets SIGKILL if the test process dies without stopping it."""
    import ctypes
    import signal

    with contextlib.suppress(Exception):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


class MotoServer:
    """A ``moto_server`` subprocess on a free loopback port, stopped by :meth:`stop`."""

    def __init__(self, log: Path, env: dict[str, str] | None = None) -> None:
        command = _moto_command()
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log
        with log.open("wb") as out:
            self.process = subprocess.Popen(
                [*command, "-H", "127.0.0.1", "-p", str(self.port)],
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env={**os.environ, **(env or {})}, preexec_fn=_die_with_parent,
            )
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"{self.url}/moto-api/data.json", timeout=1):
                    return
            except OSError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(
                        f"moto_server did not answer on {self.url}: {log.read_text()[-2000:]}"
                    ) from None
                time.sleep(0.05)

    def stop(self) -> None:
        if self.process.poll() is None:  # an emulator holds nothing worth a graceful exit
            self.process.kill()
            self.process.wait(10)

    def post(self, path: str, body: bytes = b"") -> bytes:
        request = urllib.request.Request(  # not form-encoded: moto would parse it as a form
            f"{self.url}{path}", data=body, method="POST", headers={"Content-Type": "text/plain"}
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.read()


class LostAnswer:
    """A botocore ``before-send`` hook: the first matching request reaches the server, then
    its answer is "lost" (a closed connection), so botocore retries a write that happened."""

    def __init__(self, times: int = 1) -> None:
        self.remaining = times
        self.sent = 0

    def __call__(self, request: Any, **_: Any) -> Any:
        from botocore.exceptions import ConnectionClosedError

        if self.remaining <= 0:
            return None
        self.remaining -= 1
        body = request.body
        if hasattr(body, "read"):
            position = body.tell()
            data = body.read()
            body.seek(position)
        else:
            data = body if isinstance(body, bytes) else (body or "").encode()
        forwarded = urllib.request.Request(
            request.url, data=data, method=request.method,
            headers={k: v for k, v in request.headers.items()},
        )
        with contextlib.suppress(urllib.error.HTTPError):
            with urllib.request.urlopen(forwarded, timeout=10) as response:
                response.read()
        self.sent += 1
        raise ConnectionClosedError(endpoint_url=request.url)


class Throttle:
    """A ``before-send`` hook answering the first ``times`` requests with a throttling error."""

    def __init__(self, times: int, *, json_protocol: bool = True) -> None:
        self.remaining = times
        self.refused = 0
        self.json_protocol = json_protocol

    def __call__(self, request: Any, **_: Any) -> Any:
        from botocore.awsrequest import AWSResponse

        if self.remaining <= 0:
            return None
        self.remaining -= 1
        self.refused += 1
        if self.json_protocol:
            body = b'{"__type":"ThrottlingException","message":"Rate exceeded"}'
            headers = {"Content-Type": "application/x-amz-json-1.0"}
        else:
            body = b"<Error><Code>SlowDown</Code><Message>Please reduce your rate</Message></Error>"
            headers = {"Content-Type": "application/xml"}
        return AWSResponse(request.url, 503 if not self.json_protocol else 400, headers, _Raw(body))


class Conflict:
    """A ``before-send`` hook answering the first ``times`` S3 writes with 409: another
    conditional write to the key is in flight (S3 says: retry)."""

    def __init__(self, times: int) -> None:
        self.remaining = times
        self.refused = 0

    def __call__(self, request: Any, **_: Any) -> Any:
        from botocore.awsrequest import AWSResponse

        if self.remaining <= 0:
            return None
        self.remaining -= 1
        self.refused += 1
        body = (b"<Error><Code>ConditionalRequestConflict</Code>"
                b"<Message>A conflicting operation is in progress</Message></Error>")
        return AWSResponse(request.url, 409, {"Content-Type": "application/xml"}, _Raw(body))


class _Raw:
    def __init__(self, body: bytes) -> None:
        self.body = body

    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self.body


def hook(store_client: Any, event: str, handler: Callable[..., Any]) -> None:
    """Register ``handler`` for ``event`` (e.g. ``before-send.s3.PutObject``) on a client."""
    store_client.meta.events.register(event, handler)


def unavailable(message: str) -> None:
    if in_ci():
        pytest.fail(f"{message}; AWS store tests never skip under CI=true")
    pytest.skip(message)


def start_moto(tmp_path_factory: pytest.TempPathFactory, name: str) -> MotoServer:
    try:
        import boto3  # noqa: F401
        import moto  # noqa: F401

        import agentenv_aws_stores  # noqa: F401
    except ImportError as exc:
        unavailable(f"the aws_stores plugin or moto is not installed ({exc}; {INSTALL})")
    try:
        return MotoServer(tmp_path_factory.mktemp(name) / "moto.log")
    except FileNotFoundError as exc:
        unavailable(str(exc))
        raise
