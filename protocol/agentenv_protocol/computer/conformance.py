"""Check a running computer driver against the computer/v1 contract:
``python -m agentenv_protocol.computer.conformance URL [--header 'Name: value']``.

``URL`` is the driver server's base (``http://127.0.0.1:18765``, or an env's gateway
capability URL plus ``/env/<name>``). Each check prints ``PASS`` or ``FAIL`` with what it saw;
the exit code is 1 when one fails. It sends input: run it on a desktop nobody else is using.

What it checks: the card (name, the computer/v1 extension and its features, the seven tools),
computer-ready/v1 and computer-display/v1, a screenshot (an MCP image part: a PNG whose size is
the frame's), a crop of it (a new frame with its parent), a click inside the frame, the refusals
(a point outside the frame: ``out_of_bounds``; an unknown frame: ``stale_frame``; empty text and
a key that is no key: ``invalid_argument``), a wait with a screenshot, and with the pointer group
that the pointer goes where it is moved.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import struct
import sys
from collections.abc import Mapping
from typing import Any

import attrs

from .driver import COMPUTER, COMPUTER_DISPLAY, COMPUTER_READY

SEVEN = ("computer_screenshot", "computer_click", "computer_drag", "computer_scroll",
         "computer_type", "computer_key", "computer_wait")


@attrs.frozen
class Check:
    name: str
    ok: bool
    detail: str


def png_size(data: bytes) -> tuple[int, int] | None:
    """A PNG's width and height from its header, or None when it is no PNG."""
    if len(data) < 24 or not data.startswith(b"\x89PNG\r\n\x1a\n") or data[12:16] != b"IHDR":
        return None
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def _error_code(result: Mapping[str, Any]) -> str | None:
    if not result.get("isError"):
        return None
    structured = result.get("structuredContent") or {}
    return str(structured.get("code") or "")


async def check(url: str, headers: Mapping[str, str] | None = None) -> list[Check]:
    """Every check, in order; a failure of one does not stop the rest."""
    import aiohttp

    from ..client import McpClient

    base = url.rstrip("/")
    out: list[Check] = []

    def note(name: str, ok: bool, detail: str) -> None:
        out.append(Check(name, bool(ok), detail))

    async with aiohttp.ClientSession(headers=dict(headers or {})) as http:
        async with http.get(f"{base}/.well-known/agent-env.json") as resp:
            card = await resp.json(content_type=None)
        capabilities = card.get("capabilities") or {}
        extensions = {e["uri"]: e for e in capabilities.get("extensions") or []}
        tools = {t["name"] for t in capabilities.get("tools") or []}
        computer = extensions.get(COMPUTER) or {}
        features = computer.get("params") or {}
        note("card", bool(card.get("name")) and COMPUTER in extensions
             and "buttons" in features and set(SEVEN) <= tools,
             f"name {card.get('name')!r}, computer/v1 features {sorted(features)}, "
             f"missing tools {sorted(set(SEVEN) - tools)}")

        async def extension(uri: str, op: str, method: str = "GET") -> Any:
            entry = ((extensions.get(uri) or {}).get("params") or {}).get("methods") or {}
            route = next((m["endpoint"] for m in entry.values()
                          if m["endpoint"].endswith("/" + op)), None)
            if route is None:
                return None
            async with http.request(method, base + route) as resp:
                return await resp.json(content_type=None)

        ready = await extension(COMPUTER_READY, "status")
        note("computer-ready", isinstance(ready, dict) and ready.get("ready") is True,
             f"{ready}")
        display = await extension(COMPUTER_DISPLAY, "get")
        note("computer-display", isinstance(display, dict) and display.get("width", 0) > 0
             and display.get("height", 0) > 0, f"{display}")

    async with McpClient(f"{base}/mcp", headers=dict(headers or {}),
                         client_name="agentenv-computer-conformance") as client:
        async def call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
            return dict(await client.call_tool_raw(name, arguments))

        shot = await call("computer_screenshot", {})
        frame = shot.get("structuredContent") or {}
        images = [p for p in shot.get("content") or [] if p.get("type") == "image"]
        size = png_size(base64.b64decode(images[0]["data"])) if images else None
        note("screenshot", not shot.get("isError") and bool(frame.get("frame_id"))
             and size == (frame.get("width"), frame.get("height")),
             f"frame {frame.get('frame_id')} {frame.get('width')}x{frame.get('height')}, "
             f"image {size}")
        width, height = int(frame.get("width") or 0), int(frame.get("height") or 0)
        if width and height:
            crop = await call("computer_screenshot", {
                "region": [0, 0, width // 2, height // 2], "frame_id": frame["frame_id"]})
            cropped = crop.get("structuredContent") or {}
            note("crop", cropped.get("parent_frame_id") == frame["frame_id"]
                 and (cropped.get("width"), cropped.get("height")) == (width // 2, height // 2),
                 f"{cropped.get('frame_id')} {cropped.get('width')}x{cropped.get('height')} "
                 f"of {cropped.get('parent_frame_id')}")
            inside = await call("computer_click", {"x": width // 2, "y": height // 2,
                                                   "frame_id": frame["frame_id"]})
            note("click", not inside.get("isError")
                 and (inside.get("structuredContent") or {}).get("applied") == "yes",
                 str((inside.get("content") or [{}])[0].get("text")))
            outside = await call("computer_click", {"x": width + 5, "y": 1,
                                                    "frame_id": frame["frame_id"]})
            note("click outside the frame", _error_code(outside) == "out_of_bounds",
                 f"code {_error_code(outside)!r}")
            if "computer_pointer_move" in tools:
                await call("computer_pointer_move", {"x": 10, "y": 12,
                                                     "frame_id": frame["frame_id"]})
                where = (await call("computer_pointer_position",
                                    {"frame_id": frame["frame_id"]})).get(
                    "structuredContent") or {}
                note("pointer", (where.get("x"), where.get("y")) == (10, 12), f"{where}")
        stale = await call("computer_click", {"x": 1, "y": 1, "frame_id": "f-nosuch"})
        note("unknown frame", _error_code(stale) == "stale_frame", f"code {_error_code(stale)!r}")
        empty = await call("computer_type", {"text": ""})
        note("empty text", _error_code(empty) == "invalid_argument",
             f"code {_error_code(empty)!r}")
        bogus = await call("computer_key", {"keys": ["NoSuchKey"]})
        note("no such key", _error_code(bogus) == "invalid_argument",
             f"code {_error_code(bogus)!r}")
        waited = await call("computer_wait", {"ms": 10, "screenshot": True})
        note("wait", not waited.get("isError")
             and "frame" in (waited.get("structuredContent") or {}),
             str((waited.get("content") or [{}])[0].get("text")))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m agentenv_protocol.computer.conformance",
                                     description="Check a running computer driver.")
    parser.add_argument("url", help="the driver server's base URL")
    parser.add_argument("--header", action="append", default=[], metavar="'NAME: VALUE'")
    args = parser.parse_args(argv)
    headers = dict(h.split(":", 1) for h in args.header if ":" in h)
    checks = asyncio.run(check(args.url, {k.strip(): v.strip() for k, v in headers.items()}))
    for item in checks:
        print(f"{'PASS' if item.ok else 'FAIL'} {item.name}: {item.detail}")
    failed = [c for c in checks if not c.ok]
    print(f"{len(checks) - len(failed)} of {len(checks)} checks passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
