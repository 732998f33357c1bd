"""A real OCI registry taking ``oauth2accesstoken`` logins, and an Artifact Registry API stand-in.

The registry is Debian's ``docker-registry`` (distribution 2.8) with htpasswd auth whose one user
is ``oauth2accesstoken`` and whose password is the access token the test token endpoint hands
out: so a push succeeds only with the credentials the store's ``auth()`` returns, as with
Artifact Registry's Docker endpoint. The API stand-in answers the two calls ``ensure_repository``
makes (``GET`` a repository, ``POST`` one to create it), with 404 / 403 as the real API does.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import bcrypt

from gcp_fakes.http import LOOPBACK, QuietHandler, free_port, serving
from gcp_fakes.oauth import Authority


def registry_binary() -> str | None:
    return shutil.which("docker-registry")


@contextmanager
def registry(root: Path, password: str) -> Iterator[str]:
    """``docker-registry`` on a free loopback port with htpasswd auth; yields ``host:port``."""
    binary = registry_binary()
    assert binary is not None
    root.mkdir(parents=True, exist_ok=True)
    htpasswd = root / "htpasswd"
    hashed = bcrypt.hashpw(password.encode(), bcrypt.gensalt(rounds=5)).decode()
    htpasswd.write_text(f"oauth2accesstoken:{hashed}\n")
    port = free_port()
    config = root / "config.yml"
    config.write_text(
        "version: 0.1\nlog:\n  level: warn\n"
        f"storage:\n  filesystem:\n    rootdirectory: {root / 'data'}\n"
        f"http:\n  addr: {LOOPBACK}:{port}\n"
        f"auth:\n  htpasswd:\n    realm: agentenv-test\n    path: {htpasswd}\n"
    )
    log = (root / "registry.log").open("wb")
    process = subprocess.Popen([binary, "serve", str(config)], stdout=log, stderr=subprocess.STDOUT)
    host = f"{LOOPBACK}:{port}"
    try:
        deadline = time.monotonic() + 15
        while True:
            try:
                urllib.request.urlopen(f"http://{host}/v2/", timeout=1)
            except urllib.error.HTTPError as exc:
                if exc.code == 401:
                    break
            except OSError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    f"docker-registry did not start: {(root / 'registry.log').read_text()}"
                )
            time.sleep(0.1)
        yield host
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()


_REPOSITORY = re.compile(r"^/v1/projects/([^/]+)/locations/([^/]+)/repositories(?:/([^/?]+))?")


class _ApiHandler(QuietHandler):
    server: Any

    def answer(self, status: int, body: dict[str, Any]) -> None:
        self.reply(status, json.dumps(body).encode(), {"Content-Type": "application/json"})

    def check(self) -> re.Match[str] | None:
        self.server.calls.append((self.command, self.path))
        if not self.server.authority.accepts(self.headers.get("Authorization")):
            self.answer(401, {"error": {"code": 401, "status": "UNAUTHENTICATED"}})
            return None
        match = _REPOSITORY.match(self.path)
        if match is None or match.group(1) in self.server.forbidden_projects:
            message = "Permission 'artifactregistry.repositories.get' denied on resource"
            self.answer(403, {"error": {"code": 403, "message": message}})
            return None
        return match

    def do_GET(self) -> None:
        match = self.check()
        if match is None:
            return
        name = self.path[len("/v1/") :]
        if name in self.server.repositories:
            self.answer(200, {"name": name, "format": "DOCKER"})
        else:
            self.answer(404, {"error": {"code": 404, "message": "Requested entity was not found."}})

    def do_POST(self) -> None:
        match = self.check()
        if match is None:
            return
        self.body()
        repository = self.path.split("repositoryId=", 1)[1]
        name = f"projects/{match.group(1)}/locations/{match.group(2)}/repositories/{repository}"
        self.server.repositories.add(name)
        self.answer(200, {"name": f"{name}/operations/op-1", "done": True})


@contextmanager
def artifact_registry_api(authority: Authority) -> Iterator[Any]:
    """Serve the API stand-in; the yielded server has ``url``, ``repositories``, ``calls`` and
    ``forbidden_projects``."""
    with serving(
        _ApiHandler, authority=authority, repositories=set(), calls=[], forbidden_projects=set()
    ) as server:
        yield server
