"""The gateway image: the env base image plus our protocol package, built from a generated context.

Why generated rather than pulled: our protocol is not on any registry under its name, and the
sandbox provider's hermetic build already pins ``pip install agentenv-framework-protocol`` to this
repository's wheel. So the gateway image is three Dockerfile lines any provider can build, and its
content-hash tag changes exactly when our protocol does.
"""

from __future__ import annotations

from pathlib import Path

BASE_IMAGE = "python:3.11-slim"
GATEWAY_PORT = 18765
IMAGE_NAME = "agentenv-gateway"

DOCKERFILE = f"""\
FROM {{base}}
RUN pip install --no-cache-dir --disable-pip-version-check agentenv-framework-protocol \\
 && useradd --create-home --uid 10001 gateway
USER gateway
ENV PYTHONUNBUFFERED=1
EXPOSE {GATEWAY_PORT}
CMD ["python", "-m", "agentenv_protocol.gateway", "--host", "0.0.0.0", "--port", "{GATEWAY_PORT}"]
"""


def write_gateway_context(folder: Path, base_image: str = BASE_IMAGE) -> Path:
    """Write the gateway's build context into ``folder`` and return it."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "Dockerfile").write_text(DOCKERFILE.format(base=base_image), encoding="utf-8")
    return folder


def gateway_command(children: list[str], *, name: str, ready_timeout: float,
                    mode: str = "performance", asides: dict[str, str] | None = None,
                    internal_url: str | None = None,
                    websites: list[str] | None = None) -> tuple[str, ...]:
    """The gateway's argv; the token comes from ``AGENTENV_GATEWAY_TOKEN``, never the argv.
    ``asides``: servers it reaches only at ``/env/<name>/...`` (the env state's db-mcp);
    ``internal_url``: how its servers reach it (the clock/v1 time URL it hands them);
    ``websites``: ``NAME=FRONTEND_URL,BACKEND_URL`` of a website env's sites."""
    argv = ["python", "-m", "agentenv_protocol.gateway", "--host", "0.0.0.0",
            "--port", str(GATEWAY_PORT), "--name", name, "--ready-timeout", f"{ready_timeout:g}",
            "--mode", mode]
    if internal_url:
        argv += ["--internal-url", internal_url]
    for child in children:
        argv += ["--child", child]
    for aside, url in (asides or {}).items():
        argv += ["--aside", f"{aside}={url}"]
    for site in websites or []:
        argv += ["--website", site]
    return tuple(argv)
