"""The computer driver SDK over HTTP, against PaintedScreen, a TEST DOUBLE of a desktop: an
in-memory framebuffer (a click paints the pixel it lands on, typing is recorded), served by the
real server. The desktop itself (Xvfb, xdotool) is tested in tests/e2e/agents/test_desktop_notes.py.
"""

from __future__ import annotations

import base64
import zlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from agentenv_protocol import DataPlaneClient, McpClient
from agentenv_protocol.computer import (
    ComputerDriverEnvironment,
    ComputerSettings,
    DeviceUnavailable,
    Display,
    Image,
    Platform,
    capture,
    click,
    computer_driver,
    display,
    drag,
    pointer_down,
    pointer_move,
    pointer_position,
    pointer_up,
    press,
    scroll,
    type_text,
)
from agentenv_protocol.computer.conformance import check, png_size
from agentenv_protocol.testing import RunningServer, serve_env

LINUX = Platform(os="linux", arch="amd64", display="x11")


@computer_driver(name="painted", supports=[{"os": {"type": "linux", "display": ["x11"]},
                                            "arch": ["amd64"]}])
class PaintedScreen(ComputerDriverEnvironment):
    """TEST DOUBLE: a 320x200 RGB framebuffer standing in for a desktop."""

    buttons = ("left", "right")
    max_click_count = 2

    def __init__(self, home: Path) -> None:
        super().__init__(ComputerSettings(data_paths=["notes.txt"]), LINUX)
        self.size = (320, 200)
        self.pixels = bytearray(320 * 200 * 3)
        self.typed: list[str] = []
        self.pressed: list[list[str]] = []
        self.pointer = (0, 0)
        self.up = True
        self.home = home

    @display
    def screen(self) -> Display:
        if not self.up:
            raise DeviceUnavailable("Xvfb is still starting")
        return Display(*self.size)

    @capture
    def grab(self) -> Image:
        return Image(self.size[0], self.size[1], bytes(self.pixels), "RGB")

    @click
    def click_at(self, x: int, y: int, button: str, count: int, modifiers: list[str]) -> None:
        at = (y * self.size[0] + x) * 3
        self.pixels[at:at + 3] = b"\xff\x00\x00"
        self.pointer = (x, y)

    @drag
    def drag_along(self, path: Any, button: str, duration_ms: int, modifiers: Any) -> None:
        self.pointer = tuple(path[-1])

    @scroll
    def scroll_at(self, x: int, y: int, direction: str, amount: int, modifiers: Any) -> None:
        self.pointer = (x, y)

    @type_text
    def type_in(self, text: str) -> None:
        self.typed.append(text)

    @press
    def press_keys(self, keys: list[str]) -> None:
        self.pressed.append(keys)

    @pointer_move
    def move(self, x: int, y: int) -> None:
        self.pointer = (x, y)

    @pointer_down
    def down(self, button: str) -> None:
        return None

    @pointer_up
    def release(self, button: str) -> None:
        return None

    @pointer_position
    def where(self) -> tuple[int, int]:
        return self.pointer

    def session_home(self) -> Path:
        return self.home


@pytest.fixture
async def painted(tmp_path: Path) -> AsyncIterator[tuple[PaintedScreen, RunningServer]]:
    driver = PaintedScreen(tmp_path)
    async with serve_env(driver) as server:
        yield driver, server


async def _call(server: RunningServer, name: str, **arguments: Any) -> dict[str, Any]:
    async with McpClient(f"{server.url}/mcp") as client:
        return dict(await client.call_tool_raw(name, arguments))


def _code(result: dict[str, Any]) -> str | None:
    return (result.get("structuredContent") or {}).get("code") if result.get("isError") else None


def _rgb_at(png: bytes, x: int, y: int, width: int) -> bytes:
    """A pixel of an RGB PNG written with filter 0 rows (what the SDK writes)."""
    chunks, at = [], 8
    while at < len(png):
        length = int.from_bytes(png[at:at + 4], "big")
        if png[at + 4:at + 8] == b"IDAT":
            chunks.append(png[at + 8:at + 8 + length])
        at += 12 + length
    raw = zlib.decompress(b"".join(chunks))
    row = 1 + width * 3
    return raw[y * row + 1 + x * 3:y * row + 1 + x * 3 + 3]


async def test_the_conformance_check_passes_against_a_driver(painted: Any) -> None:
    _, server = painted
    checks = await check(server.url)
    assert [c.name for c in checks if not c.ok] == [], checks
    assert {c.name for c in checks} >= {"card", "screenshot", "crop", "click outside the frame",
                                        "unknown frame", "pointer", "wait"}


async def test_a_screenshot_is_a_png_of_the_frame_and_a_click_lands_where_aimed(
        painted: Any) -> None:
    driver, server = painted
    shot = await _call(server, "computer_screenshot")
    frame = shot["structuredContent"]
    assert frame["frame_id"] == "f-1" and (frame["width"], frame["height"]) == (320, 200)
    assert shot["content"][0]["text"] == "Captured f-1: 320x200 of the 320x200 display"
    # a crop of the right half: a point in it maps back to the screen through its origin
    crop = await _call(server, "computer_screenshot", region=[160, 0, 320, 200], frame_id="f-1")
    assert crop["structuredContent"]["parent_frame_id"] == "f-1"
    clicked = await _call(server, "computer_click", x=10, y=20, frame_id="f-2")
    assert clicked["structuredContent"]["applied"] == "yes"
    assert driver.pointer == (170, 20)
    # norm space: 500 of 1000 is the middle
    await _call(server, "computer_click", x=500, y=500, space="norm", frame_id="f-1")
    assert driver.pointer == (160, 100)
    after = await _call(server, "computer_screenshot")
    png = base64.b64decode(after["content"][1]["data"])
    assert png_size(png) == (320, 200)
    assert _rgb_at(png, 170, 20, 320) == b"\xff\x00\x00"


async def test_refusals_name_the_problem(painted: Any) -> None:
    driver, server = painted
    first = await _call(server, "computer_click", x=5, y=5)
    assert _code(first) == "invalid_argument"
    assert "take a screenshot first" in first["content"][0]["text"]
    await _call(server, "computer_screenshot")
    outside = await _call(server, "computer_click", x=320, y=10)
    assert _code(outside) == "out_of_bounds"
    assert "(320, 10) is outside f-1, which is 320x200" in outside["content"][0]["text"]
    assert _code(await _call(server, "computer_click", x=1, y=1, count=3)) == \
        "invalid_argument"
    assert _code(await _call(server, "computer_click", x=1, y=1, button="middle")) == \
        "unsupported"
    control = await _call(server, "computer_type", text="a\x07b")
    assert _code(control) == "invalid_argument" and "U+0007" in control["content"][0]["text"]
    assert _code(await _call(server, "computer_key", keys=["Hyper"])) == "invalid_argument"
    await _call(server, "computer_key", keys=["ctrl", "S"])
    assert driver.pressed == [["Control", "S"]]  # a common spelling is read as its W3C name
    driver.size = (640, 400)  # the display changed: the old frame no longer maps
    stale = await _call(server, "computer_click", x=1, y=1, frame_id="f-1")
    assert _code(stale) == "stale_frame"
    assert driver.typed == []


async def test_a_desktop_not_ready_is_device_unavailable_and_ready_says_why(
        painted: Any) -> None:
    driver, server = painted
    driver.up = False
    shot = await _call(server, "computer_screenshot")
    assert _code(shot) == "device_unavailable"
    assert "the desktop is not ready" in shot["content"][0]["text"]
    async with aiohttp.ClientSession() as http, \
            http.get(f"{server.url}/agentenv/ext/computer-ready/status") as resp:
        ready = await resp.json()
    assert ready["ready"] is False
    assert ready["checks"][0]["detail"] == "Xvfb is still starting"


async def test_exec_runs_once_per_request_id_and_files_go_home(painted: Any,
                                                                 tmp_path: Path) -> None:
    _, server = painted
    marker = tmp_path / "ran"
    body = {"argv": ["sh", "-c", f"echo x >> {marker}; echo hi"], "request_id": "r1"}
    async with aiohttp.ClientSession() as http:
        for _ in range(2):
            async with http.post(f"{server.url}/agentenv/ext/computer-exec/run",
                                 json=body) as resp:
                ran = await resp.json()
            assert (ran["exit_code"], ran["stdout"]) == (0, "hi\n")
    assert marker.read_text() == "x\n"  # the repeat returned the first result
    async with DataPlaneClient(server.url) as data:
        await data.call("data/add", {"parts": [{"kind": "file", "file": {
            "name": "notes.txt", "bytes": base64.b64encode(b"milk").decode()}}]})
        got = await data.call("data/get", {})
    assert (tmp_path / "notes.txt").read_bytes() == b"milk"
    assert got["parts"][0]["file"]["name"] == "notes.txt"
    async with DataPlaneClient(server.url) as data:
        with pytest.raises(Exception, match="under the home folder"):
            await data.call("data/add", {"parts": [{"kind": "file", "file": {
                "name": "../escape.txt", "bytes": "eA=="}}]})


async def test_the_card_says_what_the_driver_has(painted: Any) -> None:
    _, server = painted
    async with aiohttp.ClientSession() as http, \
            http.get(f"{server.url}/.well-known/agent-env.json") as resp:
        card = await resp.json()
    computer = next(e for e in card["capabilities"]["extensions"]
                    if e["uri"] == "urn:agentenv:computer/v1")
    assert computer["params"]["buttons"] == ["left", "right"]
    assert computer["params"]["max_click_count"] == 2
    tools = {t["name"] for t in card["capabilities"]["tools"]}
    assert "computer_pointer_move" in tools
    assert "computer_keyboard_down" not in tools  # no keyboard group: its tools are not served


def test_a_class_missing_operations_is_refused_when_defined() -> None:
    with pytest.raises(TypeError, match="missing required operation") as refused:
        class Half(ComputerDriverEnvironment):
            @display
            def screen(self) -> Display:
                return Display(1, 1)

            @pointer_move
            def move(self, x: int, y: int) -> None:
                return None

    assert "the pointer group needs all of" in str(refused.value)


async def test_the_default_space_and_keyboard_settings_are_the_frameworks_to_set(
        painted: Any) -> None:
    driver, server = painted
    async with aiohttp.ClientSession() as http:
        async with http.post(f"{server.url}/agentenv/ext/computer-spaces/set",
                             json={"default_space": "norm", "default_norm_scale": 100}) as resp:
            assert await resp.json() == {"default_space": "norm", "default_norm_scale": 100}
        await _call(server, "computer_screenshot")
        await _call(server, "computer_click", x=50, y=50)  # the middle, on the 0-100 grid
        assert driver.pointer == (160, 100)
        async with http.post(f"{server.url}/agentenv/ext/computer-spaces/set",
                             json={"default_space": "pixels"}) as resp:
            assert resp.status == 400
        # PaintedScreen has no keyboard group: no computer-keyboard/v1 on its card
        async with http.get(f"{server.url}/.well-known/agent-env.json") as resp:
            uris = {e["uri"] for e in (await resp.json())["capabilities"]["extensions"]}
    assert "urn:agentenv:computer-spaces/v1" in uris
    assert "urn:agentenv:computer-keyboard/v1" not in uris
