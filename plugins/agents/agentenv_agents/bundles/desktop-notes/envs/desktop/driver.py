"""A computer driver for an X11 desktop: python-xlib reads the screen, xdotool sends the input.

Why xdotool: it already knows the X keysyms, the keymap and typing any character, so the driver
stays small; each input is one short xdotool run (a few milliseconds). It needs ``DISPLAY``,
``xdotool`` and ``python-xlib`` where it runs: AgentEnv's desktop image has all three.
"""

from __future__ import annotations

import asyncio
import subprocess

from agentenv_protocol.computer import (
    ComputerDriverEnvironment,
    DeliveryFailed,
    DeviceUnavailable,
    Display,
    Image,
    ReadyCheck,
    Unsupported,
    capture,
    click,
    computer_driver,
    display,
    drag,
    key_down,
    key_up,
    pointer_down,
    pointer_move,
    pointer_position,
    pointer_up,
    press,
    scroll,
    type_text,
)

BUTTONS = {"left": "1", "middle": "2", "right": "3"}
WHEEL = {"up": "4", "down": "5", "left": "6", "right": "7"}
#: W3C key names as xdotool (X keysym) names; a single character is sent as itself.
KEYSYMS = {
    "Enter": "Return", "Tab": "Tab", "Escape": "Escape", "Backspace": "BackSpace",
    "Delete": "Delete", "ArrowUp": "Up", "ArrowDown": "Down", "ArrowLeft": "Left",
    "ArrowRight": "Right", "Home": "Home", "End": "End", "PageUp": "Prior",
    "PageDown": "Next", "Insert": "Insert", "Control": "ctrl", "Shift": "shift", "Alt": "alt",
    "Meta": "super", "CapsLock": "Caps_Lock", "ContextMenu": "Menu", "PrintScreen": "Print",
    "Pause": "Pause", " ": "space", **{f"F{n}": f"F{n}" for n in range(1, 25)},
}


def keysym(key: str) -> str:
    if key in KEYSYMS:
        return KEYSYMS[key]
    if len(key) == 1:
        return key
    raise Unsupported(f"this driver has no keysym for {key!r}")


def xdotool(*args: str) -> str:
    done = subprocess.run(["xdotool", *args], capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        raise DeliveryFailed(f"xdotool {args[0]} failed: {done.stderr.strip() or done.returncode}")
    return done.stdout


@computer_driver(name="desktop", supports=[{"os": {"type": "linux", "display": ["x11"]},
                                            "arch": ["amd64", "arm64"]}])
class XdotoolDriver(ComputerDriverEnvironment):
    buttons = ("left", "right", "middle")
    max_click_count = 3
    max_drag_points = 20

    def __init__(self) -> None:
        super().__init__()
        self._x = None

    def _display(self):
        from Xlib import display as xdisplay
        from Xlib.error import DisplayError

        if self._x is None:
            try:
                self._x = xdisplay.Display()
            except (DisplayError, OSError) as exc:
                raise DeviceUnavailable(f"the X server does not answer: {exc}") from None
        return self._x

    @display
    async def screen(self) -> Display:
        def read() -> Display:
            screen = self._display().screen()
            return Display(screen.width_in_pixels, screen.height_in_pixels, 1.0)
        return await asyncio.to_thread(read)

    @capture
    async def grab(self) -> Image:
        def read() -> Image:
            from Xlib import X

            root = self._display().screen().root
            geometry = root.get_geometry()
            raw = root.get_image(0, 0, geometry.width, geometry.height, X.ZPixmap, 0xFFFFFFFF)
            return Image(geometry.width, geometry.height, bytes(raw.data), "BGRX")
        return await asyncio.to_thread(read)

    async def ready_checks(self) -> list[ReadyCheck]:
        try:
            await asyncio.to_thread(xdotool, "getmouselocation")
        except DeliveryFailed as exc:
            return [ReadyCheck("xdotool", False, exc.message)]
        return [ReadyCheck("xdotool", True, "input works")]

    async def _run(self, *args: str) -> str:
        return await asyncio.to_thread(xdotool, *args)

    async def _with_modifiers(self, modifiers: list[str], *args: str) -> None:
        held = [keysym(k) for k in modifiers]
        for key in held:
            await self._run("keydown", key)
        try:
            await self._run(*args)
        finally:
            for key in reversed(held):
                await self._run("keyup", key)

    @click
    async def click_at(self, x, y, button, count, modifiers) -> None:
        await self._run("mousemove", str(x), str(y))
        await self._with_modifiers(modifiers, "click", "--repeat", str(count), "--delay", "40",
                                   BUTTONS[button])

    @drag
    async def drag_along(self, path, button, duration_ms, modifiers) -> None:
        await self._run("mousemove", str(path[0][0]), str(path[0][1]))
        await self._run("mousedown", BUTTONS[button])
        try:
            pause = duration_ms / 1000 / max(1, len(path) - 1)
            for x, y in path[1:]:
                await asyncio.sleep(pause)
                await self._run("mousemove", str(x), str(y))
        finally:
            await self._run("mouseup", BUTTONS[button])

    @scroll
    async def scroll_at(self, x, y, direction, amount, modifiers) -> None:
        await self._run("mousemove", str(x), str(y))
        await self._with_modifiers(modifiers, "click", "--repeat", str(amount), WHEEL[direction])

    @type_text
    async def type_in(self, text) -> None:
        delay = str(self.settings.type_delay_ms)
        for line_number, line in enumerate(text.split("\n")):
            if line_number:
                await self._run("key", "Return")
            if line:
                await self._run("type", "--delay", delay, "--", line)

    @press
    async def press_keys(self, keys) -> None:
        await self._run("key", "+".join(keysym(k) for k in keys))

    @pointer_move
    async def move(self, x, y) -> None:
        await self._run("mousemove", str(x), str(y))

    @pointer_down
    async def down(self, button) -> None:
        await self._run("mousedown", BUTTONS[button])

    @pointer_up
    async def up(self, button) -> None:
        await self._run("mouseup", BUTTONS[button])

    @pointer_position
    async def where(self) -> tuple[int, int]:
        out = await self._run("getmouselocation", "--shell")
        fields = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
        return int(fields["X"]), int(fields["Y"])

    @key_down
    async def keys_down(self, keys) -> None:
        for key in keys:
            await self._run("keydown", keysym(key))

    @key_up
    async def keys_up(self, keys) -> None:
        for key in keys:
            await self._run("keyup", keysym(key))


if __name__ == "__main__":
    XdotoolDriver().serve()
