"""Seeding one env server behind the gateway with a file (an environment artifact's data).

As the reference does it: the file is copied into the server's container at
``/data/<filename>``, then the server gets ``data/reset`` and a ``data/add`` whose one part is
``{"kind": "file", "file": {"uri": "file:///data/<filename>", "name", "mimeType"}}``. Where
the sandbox cannot write into its containers the part carries the bytes inline instead
(``bytes``, base64), which :meth:`agentenv_protocol.FileContent.read` reads either way.

The call goes through the gateway's pass-through to that one server (``/env/<child>/agentenv``),
so it works wherever the gateway is reachable; the child's name there is its card's, found in
the gateway's card in the order the servers were started.

A website (``website`` env) is seeded the same way through its backend: the file goes to
``/tmp/data/<filename>`` in the backend container (the reference's path for websites), then
``data/reset`` and ``data/add`` at ``/svc/<name>/agentenv``; a backend without the data plane
(404) gets the reference's REST fallback, ``POST /api/reset`` then ``POST /api/add`` with
``{"file_path": ...}``.

A file named ``*.agentenv-parts.json`` (``{"parts": [...]}``, what ``snapshot_env`` saves of a
server's ``data/get``) is not a file for the server: its parts are replayed, ``data/reset``
then ``data/add`` of them, so a snapshot loads back as it was taken.
"""

from __future__ import annotations

import base64
import mimetypes
import posixpath
from typing import TYPE_CHECKING, Any

from agent_env.api import SandboxUnsupported, StepError

if TYPE_CHECKING:
    from agent_env.api import ArtifactFile
    from agentenv_mcp_env.deployment import EnvServerRecord, GatewayDeployment

#: Where a seeded file lands in the server's container (the reference's path).
DATA_FOLDER = "/data"
#: Where it lands in a website's backend container (the reference's path for websites).
WEBSITE_DATA_FOLDER = "/tmp/data"
#: A load is a server reading a whole file: far longer than a tool call may take.
LOAD_TIMEOUT_SECONDS = 600.0
#: A server's data/get answer, saved by snapshot_env and replayed (not handed over) on load.
PARTS_SUFFIX = ".agentenv-parts.json"


async def seed_server(deployment: GatewayDeployment, name: str, file: ArtifactFile) -> None:
    from agentenv_protocol.client import DataPlaneClient, fetch_card
    from agentenv_protocol.errors import ProtocolError, TransportError

    index = next((i for i, s in enumerate(deployment.servers) if s.environment_name == name),
                 None)
    if index is None:
        raise StepError(f"env '{deployment.env_id}' has no server '{name}'")
    server = deployment.servers[index]
    filename = posixpath.basename(file.path)
    if filename.endswith(PARTS_SUFFIX):
        parts = _saved_parts(file.data, filename)
    else:
        parts = [{"kind": "file", "file": await _file_content(deployment, server.container,
                                                              filename, file.data)}]
    try:
        card = await fetch_card(deployment.url, headers=deployment.headers)
        children = list(card.children_environments or [])
        if len(children) != len(deployment.servers):
            raise StepError(f"env '{deployment.env_id}': its gateway lists {len(children)} of "
                            f"its {len(deployment.servers)} servers (one is not ready)")
        base = f"{deployment.url}/env/{children[index].name}"
        async with DataPlaneClient(base, headers=deployment.headers,
                                   timeout=LOAD_TIMEOUT_SECONDS) as data:
            await data.reset()
            if parts:
                await data.call("data/add", {"parts": parts})
    except (ProtocolError, TransportError) as exc:
        raise StepError(f"server '{name}' did not take {filename}: {exc}") from None


async def seed_website(deployment: GatewayDeployment, site: EnvServerRecord,
                       file: ArtifactFile) -> None:
    """Seed website ``site`` (its backend's record) through ``/svc/<name>/``."""
    import aiohttp

    from agentenv_protocol.client import DataPlaneClient
    from agentenv_protocol.errors import ProtocolError, TransportError

    name = str(site.environment_name)
    filename = posixpath.basename(file.path)
    content = await _file_content(deployment, site.container, filename, file.data,
                                  WEBSITE_DATA_FOLDER)
    base = f"{deployment.url}/svc/{name}"
    try:
        async with DataPlaneClient(base, headers=deployment.headers,
                                   timeout=LOAD_TIMEOUT_SECONDS) as data:
            await data.reset()
            await data.call("data/add", {"parts": [{"kind": "file", "file": content}]})
        return
    except TransportError as exc:
        if exc.status not in (404, 405):  # anything but "no data plane here" fails
            raise StepError(f"website '{name}' did not take {filename}: {exc}") from None
    except ProtocolError as exc:
        raise StepError(f"website '{name}' did not take {filename}: {exc}") from None
    if "uri" not in content:
        raise StepError(f"website '{name}' serves no data plane, and its REST fallback "
                        "needs the file in its container, which this sandbox cannot write")
    path = content["uri"].removeprefix("file://")
    timeout = aiohttp.ClientTimeout(total=LOAD_TIMEOUT_SECONDS)
    async with aiohttp.ClientSession(headers=deployment.headers, timeout=timeout) as http:
        for route, body in (("api/reset", None), ("api/add", {"file_path": path})):
            try:
                async with http.post(f"{base}/{route}", json=body) as resp:
                    if resp.status >= 300:
                        text = (await resp.text())[:300]
                        raise StepError(f"website '{name}' did not take {filename}: POST "
                                        f"/{route} answered {resp.status}: {text}")
            except (TimeoutError, aiohttp.ClientError) as exc:
                raise StepError(f"website '{name}' did not take {filename}: POST /{route} "
                                f"failed ({type(exc).__name__})") from None


async def _file_content(deployment: GatewayDeployment, container: str, filename: str,
                        data: bytes, folder: str = DATA_FOLDER) -> dict[str, str]:
    """The file part's content: a ``file://`` path in the server's container, else inline."""
    content = {"name": filename,
               "mimeType": mimetypes.guess_type(filename)[0] or "application/octet-stream"}
    try:
        if deployment.sandbox is None:
            raise SandboxUnsupported("no sandbox")
        path = f"{folder}/{filename}"
        await deployment.sandbox.put_container_file(container, path, data)
        content["uri"] = f"file://{path}"
    except SandboxUnsupported:
        content["bytes"] = base64.b64encode(data).decode("ascii")
    return content


def _saved_parts(data: bytes, filename: str) -> list[Any]:
    import json

    try:
        saved = json.loads(data)
    except ValueError as exc:
        raise StepError(f"{filename} is not the JSON snapshot_env saves: {exc}") from None
    parts = saved.get("parts") if isinstance(saved, dict) else None
    if not isinstance(parts, list):
        raise StepError(f"{filename} holds no parts list (snapshot_env saves {{\"parts\": "
                        "[...]})")
    return parts
