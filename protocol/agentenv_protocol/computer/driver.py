"""``ComputerDriverEnvironment``: a driver writes the screen and input operations
(:mod:`.operations`); this base class serves the computer contract from them.

* **Tools** (agents call them): ``computer_screenshot``, ``computer_click``, ``computer_drag``,
  ``computer_scroll``, ``computer_type``, ``computer_key``, ``computer_wait``; with the pointer
  group ``computer_pointer_move|down|up|position|list``; with the keyboard group
  ``computer_keyboard_down|up``. Points are in a frame's pixels (a screenshot's ``frame_id``,
  by default the caller's latest) or on a ``norm`` grid over it (:mod:`.frames`). Each result
  has a one-line summary as its text and the rest as structured content; a screenshot adds
  the image as an MCP ``image`` content part (PNG, or JPEG with Pillow).
* **Extensions** (the framework calls them, never agents): computer-ready/v1 ``status`` (real
  checks, no input), computer-display/v1 ``get``/``set``, computer-exec/v1 ``run`` (a command in
  the desktop session; a repeated ``request_id`` returns the first result),
  computer-spaces/v1 ``get``/``set`` (the default coordinate space) and, with the keyboard
  group, computer-keyboard/v1 ``get``/``set`` (tap hold, typing delay, layout, longest hold).
* **Data plane**: ``data/add`` writes file parts under the session user's home,
  ``data/get`` returns the files ``data_paths`` names (:mod:`.settings`).
* **Card**: the tools the driver's operations support, and the ``computer/v1`` extension with
  its features (buttons, limits, platform, supports).

Input is sent one call at a time (a second waits its turn, up to ``queue_wait_s``, then
``input_busy``). Before a screenshot or input the display must answer: a desktop still
starting is a ``device_unavailable`` error naming why, never a hang.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import inspect
import os
import posixpath
import unicodedata
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from ..card import ExtensionInfo
from ..env import (
    AgentEnvEnvironment,
    ToolContext,
    add_data,
    environment_card,
    extension,
    get_data,
    reset_data,
    tool,
)
from .errors import (
    ComputerError,
    DeviceUnavailable,
    InputBusy,
    Internal,
    InvalidArgument,
    Unsupported,
)
from .frames import Frame, Frames, frame_point, frame_region
from .keys import chord
from .operations import (
    GROUPS,
    INPUT,
    Display,
    Effect,
    ExecResult,
    Image,
    ReadyCheck,
    check_class,
    default_for,
    resolve,
)
from .pixels import crop, jpeg, png
from .platform import Platform, detect
from .settings import ComputerSettings, load_settings

COMPUTER = "urn:agentenv:computer/v1"
COMPUTER_READY = "urn:agentenv:computer-ready/v1"
COMPUTER_DISPLAY = "urn:agentenv:computer-display/v1"
COMPUTER_POINTER = "urn:agentenv:computer-pointer/v1"
COMPUTER_KEYBOARD = "urn:agentenv:computer-keyboard/v1"
COMPUTER_SPACES = "urn:agentenv:computer-spaces/v1"
#: The ranges computer-keyboard/v1 ``set`` takes, in milliseconds.
KEYBOARD_RANGES = {"tap_hold_ms": (0, 1000), "type_delay_ms": (0, 1000),
                   "max_hold_ms": (0, 600_000)}
COMPUTER_EXEC = "urn:agentenv:computer-exec/v1"
DEFAULT_IDENTITY = "default"
MAX_EXEC_TIMEOUT_S = 3600
GROUP_TOOLS = {"pointer": ("computer_pointer_move", "computer_pointer_down",
                           "computer_pointer_up", "computer_pointer_position",
                           "computer_pointer_list"),
               "keyboard": ("computer_keyboard_down", "computer_keyboard_up")}
_READ = {"readOnlyHint": True, "openWorldHint": False}
_INPUT = {"readOnlyHint": False, "destructiveHint": False, "idempotentHint": False,
          "openWorldHint": False}

Coord = Annotated[float | None, "A coordinate in the chosen space (frame pixels by default)"]
FrameId = Annotated[str | None, "The frame the point refers to; default: your latest"]
Space = Annotated[Literal["frame", "norm"] | None,
                  "frame: pixels of the frame's image; norm: 0 to norm_scale over it"]
NormScale = Annotated[int | None, "The norm grid's size, for space=norm"]
Modifiers = Annotated[list[str] | None, "W3C key names held for this action, such as ['Shift']"]
Shot = Annotated[bool, "Return a fresh screenshot after acting"]
Button = Annotated[str | None, "left (default); others where the computer has them"]


class ComputerDriverEnvironment(AgentEnvEnvironment):
    """Subclass it, mark the operations, ``serve()`` it (see the module)."""

    buttons: ClassVar[tuple[str, ...]] = ("left",)
    max_click_count: ClassVar[int] = 1
    #: ``"all"`` (every W3C key) or the key names this computer can press.
    keys: ClassVar[Any] = "all"
    max_text_length: ClassVar[int] = 10_000
    max_wait_ms: ClassVar[int] = 60_000
    max_drag_points: ClassVar[int] = 2
    max_duration_ms: ClassVar[int] = 10_000
    max_key_repeat: ClassVar[int] = 100
    max_scroll_amount: ClassVar[int] = 100
    #: ``(width, height)`` modes computer-display/v1 ``set`` takes (with ``@set_display``).
    display_modes: ClassVar[tuple[tuple[int, int], ...]] = ()
    layouts: ClassVar[tuple[str, ...]] = ("us",)
    #: The platforms the driver supports: ``[{"os": {"type": "linux", "display": ["x11"]},
    #: "arch": ["amd64"]}]`` (``@computer_driver(supports=...)``).
    supports: ClassVar[list[dict[str, Any]]] = []
    tool_access = True

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        check_class(cls)

    def __init__(self, settings: ComputerSettings | None = None,
                 platform: Platform | None = None) -> None:
        self.settings = settings if settings is not None else load_settings()
        self.platform = platform if platform is not None else detect()
        self._ops = resolve(type(self), self.platform)
        self.frames = Frames()
        self._input = asyncio.Lock()
        self._held: dict[str, list[str]] = {}
        self._commands: dict[str, Any] = {}

    # -- what the driver does ----------------------------------------------------------------
    def has(self, capability: str) -> bool:
        """Whether an operation, or a whole group (``pointer``, ``keyboard``), works here."""
        ops = self.__dict__.get("_ops")
        if ops is None:
            raise TypeError(f"{type(self).__qualname__}.__init__ must call super().__init__()")
        if capability in GROUPS:
            return all(op in ops for op in GROUPS[capability])
        return capability in ops

    async def call(self, operation: str, *args: Any) -> Any:
        """Run the driver's method for ``operation``; a driver's own crash is ``internal``."""
        if not self.has(operation):
            raise Unsupported(f"this computer cannot {operation.replace('_', ' ')}")
        method = getattr(self, self._ops[operation])
        try:
            result = method(*args)
            if inspect.isawaitable(result):
                result = await result
        except ComputerError:
            raise
        except Exception as exc:
            raise Internal(f"the driver's {operation} failed: {type(exc).__name__}: {exc}")\
                from None
        return result

    def session_home(self) -> Path:
        """The session user's home: where data/add writes and data_paths are read."""
        return Path(os.path.expanduser("~"))

    def caller_identity(self, context: ToolContext) -> str:
        """Who a call comes from (each caller has its own latest frame)."""
        return DEFAULT_IDENTITY

    async def ready_checks(self) -> list[ReadyCheck]:
        """The driver's own checks, run by computer-ready/v1 with the base class's."""
        return []

    async def display_now(self) -> Display:
        display = await self.call("display")
        if not isinstance(display, Display):
            raise Internal(f"@display returned {type(display).__name__}, not a Display")
        return display

    async def ensure_ready(self) -> Display:
        """The display, or ``device_unavailable`` naming why it does not answer."""
        try:
            return await self.display_now()
        except (Internal, DeviceUnavailable) as exc:
            raise DeviceUnavailable(f"the desktop is not ready: {exc.message}") from None

    async def capture(self, identity: str) -> Frame:
        display = await self.ensure_ready()
        image = await self.call("capture")
        if not isinstance(image, Image):
            raise Internal(f"@capture returned {type(image).__name__}, not an Image")
        return self.frames.add(image, display, identity=identity)

    @contextlib.asynccontextmanager
    async def _turn(self) -> Any:
        try:
            await asyncio.wait_for(self._input.acquire(), self.settings.queue_wait_s)
        except TimeoutError:
            raise InputBusy(f"other input held the computer for {self.settings.queue_wait_s:g}"
                            " s; try again") from None
        try:
            yield
        finally:
            self._input.release()

    async def _act(self, ctx: ToolContext, operation: str, args: tuple[Any, ...], summary: str,
                   screenshot: bool, repeat: int = 1) -> dict[str, Any]:
        assert operation in INPUT
        async with self._turn():
            effect = None
            for _ in range(repeat):
                effect = await self.call(operation, *args)
        data: dict[str, Any] = {"summary": summary, "applied": "yes",
                                "delivery": "foreground", "others_since_frame": 0}
        if isinstance(effect, Effect):
            told = {k: v for k, v in {"focus_changed": effect.focus_changed,
                                      "pointer_moved": effect.pointer_moved,
                                      "clipboard_used": effect.clipboard_used,
                                      "detail": effect.detail}.items() if v is not None}
            if told:
                data["effect"] = told
        image = None
        if screenshot:
            frame = await self.capture(self.caller_identity(ctx))
            data["frame"] = frame.data()
            image = (frame, "png", None)
        return _send(data, image)

    def _space(self, space: str | None, norm_scale: int | None) -> tuple[str, int]:
        chosen = space or self.settings.default_space
        if chosen not in ("frame", "norm"):
            raise InvalidArgument(f"space is frame or norm, not {space!r}")
        scale = norm_scale if norm_scale is not None else self.settings.default_norm_scale
        if not isinstance(scale, int) or scale < 1:
            raise InvalidArgument(f"norm_scale is a whole number from 1, got {norm_scale!r}")
        return chosen, scale

    async def _point(self, ctx: ToolContext, x: float | None, y: float | None,
                     frame_id: str | None, space: str | None, norm_scale: int | None,
                     ) -> tuple[tuple[int, ...], str]:
        """The screen pixel of a point (empty: at the pointer) and a phrase naming it."""
        if x is None and y is None and frame_id is None and self.has("pointer"):
            return (), ""
        if x is None or y is None:
            raise InvalidArgument("give x and y" + (", or neither to act at the pointer"
                                                   if self.has("pointer") else ""))
        frame = self.frames.get(frame_id, self.caller_identity(ctx))
        self.frames.check_current(frame, await self.display_now())
        chosen, scale = self._space(space, norm_scale)
        fx, fy = frame_point(frame, x, y, chosen, scale)
        in_space = f" ({chosen} {scale})" if chosen == "norm" else ""
        return frame.to_screen(fx, fy), f" at ({x:g}, {y:g}){in_space} in {frame.id}"

    async def _at_pointer(self, point: tuple[int, ...]) -> tuple[int, ...]:
        return point or tuple(await self.call("pointer_position"))

    def _button(self, button: str | None) -> str:
        chosen = button or "left"
        if chosen not in self.buttons:
            raise Unsupported(f"this computer has no {chosen} button; it has "
                              f"{', '.join(self.buttons)}")
        return chosen

    def _modifiers(self, modifiers: list[str] | None) -> list[str]:
        return chord(modifiers, self.keys) if modifiers else []

    # -- the tools -----------------------------------------------------------------------------
    @tool(annotations=_READ)
    async def computer_screenshot(
        self, ctx: ToolContext,
        region: Annotated[list[float] | None, "[x0, y0, x1, y1] of a frame: that part at "
                          "native resolution, as a new frame (zoom)"] = None,
        frame_id: Annotated[str | None, "The frame region refers to; default: your latest"]
        = None,
        format: Annotated[Literal["png", "jpeg"], "The image encoding"] = "png",
        quality: Annotated[int | None, "JPEG quality, 1 to 95"] = None,
        space: Space = None, norm_scale: NormScale = None,
    ) -> dict[str, Any]:
        """Capture the screen as a frame: the image, a frame_id to point into later, its size
        and the display's. With region, crop a frame at native resolution instead."""
        await self.ensure_ready()
        identity = self.caller_identity(ctx)
        if format not in ("png", "jpeg"):
            raise InvalidArgument(f"format is png or jpeg, not {format!r}")
        if quality is not None and not (format == "jpeg" and 1 <= quality <= 95):
            raise InvalidArgument("quality is for format=jpeg, from 1 to 95")
        if region is None:
            if frame_id is not None:
                raise InvalidArgument("frame_id names the frame a region crops; give a region")
            frame = await self.capture(identity)
            summary = (f"Captured {frame.id}: {frame.width}x{frame.height} of the "
                       f"{frame.display.width}x{frame.display.height} display")
        else:
            parent = self.frames.get(frame_id, identity)
            self.frames.check_current(parent, await self.display_now())
            box = frame_region(parent, region, *self._space(space, norm_scale))
            frame = self.frames.add(crop(parent.image, box), parent.display, identity=identity,
                                    parent=parent, origin=(parent.origin[0] + box[0],
                                                           parent.origin[1] + box[1]))
            summary = (f"Cropped {frame.id}: {frame.width}x{frame.height} of {parent.id} at "
                       f"({box[0]}, {box[1]})")
        return _send({"summary": summary, **frame.data()}, (frame, format, quality))

    @tool(annotations=_INPUT)
    async def computer_click(
        self, ctx: ToolContext, x: Coord = None, y: Coord = None, frame_id: FrameId = None,
        button: Button = None,
        count: Annotated[int, "1; 2 or 3 for double and triple clicks where declared"] = 1,
        modifiers: Modifiers = None, screenshot: Shot = False, space: Space = None,
        norm_scale: NormScale = None,
    ) -> dict[str, Any]:
        """Click at a point of a frame."""
        await self.ensure_ready()
        chosen = self._button(button)
        _range("count", count, 1, self.max_click_count)
        held = self._modifiers(modifiers)
        point, where = await self._point(ctx, x, y, frame_id, space, norm_scale)
        point = await self._at_pointer(point)
        times = f" x{count}" if count > 1 else ""
        return await self._act(ctx, "click", (*point, chosen, count, held),
                               f"Clicked {chosen}{times}{where}", screenshot)

    @tool(annotations=_INPUT)
    async def computer_drag(
        self, ctx: ToolContext,
        path: Annotated[list[list[float]], "Points [[x, y], ...]: a start and an end at least"],
        frame_id: FrameId = None, button: Button = None,
        duration_ms: Annotated[int | None, "How long the move takes"] = None,
        modifiers: Modifiers = None, screenshot: Shot = False, space: Space = None,
        norm_scale: NormScale = None,
    ) -> dict[str, Any]:
        """Press at the first point, move through the path, release at the last."""
        await self.ensure_ready()
        chosen = self._button(button)
        if not isinstance(path, list) or not 2 <= len(path) <= self.max_drag_points:
            raise InvalidArgument(f"path has from 2 to {self.max_drag_points} points here")
        duration = self.settings.drag_duration_ms if duration_ms is None else duration_ms
        _range("duration_ms", duration, 0, self.max_duration_ms)
        held = self._modifiers(modifiers)
        frame = self.frames.get(frame_id, self.caller_identity(ctx))
        self.frames.check_current(frame, await self.display_now())
        chosen_space, scale = self._space(space, norm_scale)
        screen = []
        for point in path:
            if not (isinstance(point, list) and len(point) == 2):
                raise InvalidArgument("each path point is [x, y]")
            screen.append(frame.to_screen(*frame_point(frame, point[0], point[1],
                                                       chosen_space, scale)))
        return await self._act(ctx, "drag", (screen, chosen, duration, held),
                               f"Dragged {chosen} through {len(path)} points of {frame.id} in "
                               f"{duration} ms", screenshot)

    @tool(annotations=_INPUT)
    async def computer_scroll(
        self, ctx: ToolContext,
        direction: Annotated[Literal["up", "down", "left", "right"],
                             "Where the view moves: down shows what is further down"],
        x: Coord = None, y: Coord = None, frame_id: FrameId = None,
        amount: Annotated[int, "How many steps (wheel notches)"] = 3,
        modifiers: Modifiers = None, screenshot: Shot = False, space: Space = None,
        norm_scale: NormScale = None,
    ) -> dict[str, Any]:
        """Scroll the content under a point."""
        await self.ensure_ready()
        if direction not in ("up", "down", "left", "right"):
            raise InvalidArgument(f"direction is up, down, left or right, not {direction!r}")
        _range("amount", amount, 1, self.max_scroll_amount)
        held = self._modifiers(modifiers)
        point, where = await self._point(ctx, x, y, frame_id, space, norm_scale)
        point = await self._at_pointer(point)
        return await self._act(ctx, "scroll", (*point, direction, amount, held),
                               f"Scrolled {direction} {amount}{where}", screenshot)

    @tool(annotations=_INPUT)
    async def computer_type(
        self, ctx: ToolContext,
        text: Annotated[str, "Any text; \\n types Enter and \\t types Tab"],
        screenshot: Shot = False,
    ) -> dict[str, Any]:
        """Type text into whatever has keyboard focus."""
        await self.ensure_ready()
        if not isinstance(text, str) or not text:
            raise InvalidArgument("text is empty")
        if len(text) > self.max_text_length:
            raise InvalidArgument(f"text is at most {self.max_text_length} characters here, "
                                  f"got {len(text)}")
        control = sorted({f"U+{ord(c):04X}" for c in text
                          if c not in "\n\t" and unicodedata.category(c) == "Cc"})
        if control:
            raise InvalidArgument(f"text has control characters {control}; press keys with "
                                  "computer_key")
        return await self._act(ctx, "type_text", (text,), f"Typed {len(text)} characters",
                               screenshot)

    @tool(annotations=_INPUT)
    async def computer_key(
        self, ctx: ToolContext,
        keys: Annotated[list[str], "One chord of W3C key names, pressed in order and released "
                        "in reverse: ['Control', 's'] or ['Enter']"],
        repeat: Annotated[int, "How many times to press it"] = 1,
        screenshot: Shot = False,
    ) -> dict[str, Any]:
        """Press one key chord."""
        await self.ensure_ready()
        names = chord(keys, self.keys)
        _range("repeat", repeat, 1, self.max_key_repeat)
        times = f" x{repeat}" if repeat > 1 else ""
        return await self._act(ctx, "press", (names,), f"Pressed {'+'.join(names)}{times}",
                               screenshot, repeat=repeat)

    @tool(annotations=_READ)
    async def computer_wait(
        self, ctx: ToolContext,
        ms: Annotated[int, "How long to wait, in milliseconds"] = 1000,
        screenshot: Shot = False,
    ) -> dict[str, Any]:
        """Wait, then optionally take a fresh screenshot."""
        await self.ensure_ready()
        _range("ms", ms, 0, self.max_wait_ms)
        await asyncio.sleep(ms / 1000)
        data: dict[str, Any] = {"summary": f"Waited {ms} ms", "waited_ms": ms}
        if not screenshot:
            return _send(data)
        frame = await self.capture(self.caller_identity(ctx))
        data["summary"] += f", then captured {frame.id}"
        data["frame"] = frame.data()
        return _send(data, (frame, "png", None))

    @tool(annotations=_INPUT)
    async def computer_pointer_move(
        self, ctx: ToolContext, x: Annotated[float, "A coordinate in the chosen space"],
        y: Annotated[float, "A coordinate in the chosen space"], frame_id: FrameId = None,
        screenshot: Shot = False, space: Space = None, norm_scale: NormScale = None,
    ) -> dict[str, Any]:
        """Move the pointer to a point; hover effects happen."""
        await self.ensure_ready()
        point, where = await self._point(ctx, x, y, frame_id, space, norm_scale)
        return await self._act(ctx, "pointer_move", point, f"Moved the pointer{where}",
                               screenshot)

    async def _button_action(self, ctx: ToolContext, op: str, verb: str, button: str | None,
                             x: float | None, y: float | None, frame_id: str | None,
                             screenshot: bool, space: str | None,
                             norm_scale: int | None) -> dict[str, Any]:
        await self.ensure_ready()
        chosen = self._button(button)
        if (x is None) != (y is None):
            raise InvalidArgument("give both x and y, or neither")
        where = ""
        if x is not None:
            point, where = await self._point(ctx, x, y, frame_id, space, norm_scale)
            async with self._turn():
                await self.call("pointer_move", *point)
        return await self._act(ctx, op, (chosen,), f"{verb} {chosen}{where}", screenshot)

    @tool(annotations=_INPUT)
    async def computer_pointer_down(
        self, ctx: ToolContext, button: Button = None,
        x: Annotated[float | None, "Move here first"] = None,
        y: Annotated[float | None, "Move here first"] = None, frame_id: FrameId = None,
        screenshot: Shot = False, space: Space = None, norm_scale: NormScale = None,
    ) -> dict[str, Any]:
        """Press a button, optionally after moving to a point."""
        return await self._button_action(ctx, "pointer_down", "Pressed", button, x, y,
                                         frame_id, screenshot, space, norm_scale)

    @tool(annotations=_INPUT)
    async def computer_pointer_up(
        self, ctx: ToolContext, button: Button = None,
        x: Annotated[float | None, "Move here first"] = None,
        y: Annotated[float | None, "Move here first"] = None, frame_id: FrameId = None,
        screenshot: Shot = False, space: Space = None, norm_scale: NormScale = None,
    ) -> dict[str, Any]:
        """Release a button, optionally after moving to a point."""
        return await self._button_action(ctx, "pointer_up", "Released", button, x, y,
                                         frame_id, screenshot, space, norm_scale)

    @tool(annotations=_READ)
    async def computer_pointer_position(
        self, ctx: ToolContext,
        frame_id: Annotated[str | None, "The frame to report in; default: your latest"] = None,
    ) -> dict[str, Any]:
        """Where the pointer is, in a frame's pixels and on the screen."""
        await self.ensure_ready()
        sx, sy = await self.call("pointer_position")
        identity = self.caller_identity(ctx)
        frame = self.frames.get(frame_id, identity) if frame_id is not None \
            else self.frames.latest(identity)
        data: dict[str, Any] = {"screen": {"x": sx, "y": sy}}
        if frame is None:
            return _send({"summary": f"The pointer is at screen ({sx}, {sy})", **data})
        fx, fy = frame.from_screen(sx, sy)
        inside = frame.contains(fx, fy)
        where = f"({fx}, {fy}) in {frame.id}" if inside else \
            f"outside {frame.id}, at ({fx}, {fy}) in its pixels"
        return _send({"summary": f"The pointer is {where}, screen ({sx}, {sy})", **data,
                      "frame_id": frame.id, "x": fx, "y": fy, "inside_frame": inside})

    @tool(annotations=_READ)
    async def computer_pointer_list(self) -> dict[str, Any]:
        """The pointers you may use, and which is your default."""
        return _send({"summary": "1 pointer: default (foreground)", "pointers": [
            {"id": "default", "kind": "foreground", "label": "The computer's pointer",
             "default": True}]})

    @tool(annotations=_INPUT)
    async def computer_keyboard_down(
        self, ctx: ToolContext,
        keys: Annotated[list[str], "W3C key names, pressed in the order given"],
        hold_ms: Annotated[int | None, "Hold this long, then release in reverse; without it "
                           "they stay down until computer_keyboard_up"] = None,
        screenshot: Shot = False,
    ) -> dict[str, Any]:
        """Press keys and keep them down."""
        await self.ensure_ready()
        names = chord(keys, self.keys)
        if hold_ms is not None and not 0 <= hold_ms <= self.settings.max_hold_ms:
            raise InvalidArgument(f"hold_ms is from 0 to {self.settings.max_hold_ms}, "
                                  f"got {hold_ms}")
        identity = self.caller_identity(ctx)
        result = await self._act(ctx, "key_down", (names,),
                                 f"Held {'+'.join(names)}" + (f" for {hold_ms} ms"
                                                              if hold_ms is not None else ""),
                                 screenshot)
        if hold_ms is None:
            self._held.setdefault(identity, []).extend(names)
        else:
            await asyncio.sleep(hold_ms / 1000)
            async with self._turn():
                await self.call("key_up", list(reversed(names)))
        return result

    @tool(annotations=_INPUT)
    async def computer_keyboard_up(
        self, ctx: ToolContext,
        keys: Annotated[list[str] | None, "The keys to release; default: all you hold"] = None,
        screenshot: Shot = False,
    ) -> dict[str, Any]:
        """Release held keys."""
        await self.ensure_ready()
        identity = self.caller_identity(ctx)
        names = chord(keys, self.keys) if keys is not None else \
            list(reversed(self._held.get(identity, [])))
        if not names:
            raise InvalidArgument("you are holding no keys")
        result = await self._act(ctx, "key_up", (names,), f"Released {'+'.join(names)}",
                                 screenshot)
        left = [k for k in self._held.get(identity, []) if k not in names]
        self._held[identity] = left
        return result

    # -- the framework's extensions ----------------------------------------------------------
    @extension(COMPUTER_READY, op="status", method="GET",
               description="Whether the computer is usable now, by real checks; no input.")
    async def computer_ready_status(self) -> dict[str, Any]:
        checks = []
        try:
            display = await self.display_now()
            checks.append(ReadyCheck("display", True, f"{display.width}x{display.height}"))
        except ComputerError as exc:
            checks.append(ReadyCheck("display", False, exc.message))
        try:
            checks += await self.ready_checks()
        except ComputerError as exc:
            checks.append(ReadyCheck("driver", False, exc.message))
        return {"ready": all(c.ok for c in checks),
                "checks": [{"name": c.name, "ok": c.ok, "detail": c.detail} for c in checks]}

    @extension(COMPUTER_DISPLAY, op="get", method="GET",
               description="Get or set the display's resolution and scale.")
    async def computer_display_get(self) -> dict[str, Any]:
        return self._display_data(await self.ensure_ready())

    @extension(COMPUTER_DISPLAY, op="set")
    async def computer_display_set(self, width: int, height: int,
                                   scale: float | None = None) -> dict[str, Any]:
        if [width, height] not in [list(m) for m in self.display_modes] \
                or not self.has("set_display"):
            modes = ", ".join(f"{w}x{h}" for w, h in self.display_modes) or "none"
            raise InvalidArgument(f"{width}x{height} is not a display mode of this computer "
                                  f"(its modes: {modes})")
        async with self._turn():
            now = await self.ensure_ready()
            changed = await self.call("set_display", width, height,
                                      now.scale if scale is None else scale)
        return self._display_data(changed if isinstance(changed, Display)
                                  else await self.display_now())

    @extension(COMPUTER_SPACES, op="get", method="GET",
               description="Get or set the default coordinate space of the point tools.")
    async def computer_spaces_get(self) -> dict[str, Any]:
        return {"default_space": self.settings.default_space,
                "default_norm_scale": self.settings.default_norm_scale}

    @extension(COMPUTER_SPACES, op="set")
    async def computer_spaces_set(self, default_space: str,
                                  default_norm_scale: int | None = None) -> dict[str, Any]:
        space, scale = self._space(default_space, default_norm_scale)
        self.settings.default_space, self.settings.default_norm_scale = space, scale
        return await self.computer_spaces_get()

    @extension(COMPUTER_KEYBOARD, op="get", method="GET",
               description="Get or set the tap hold, typing delay, layout and longest hold.")
    async def computer_keyboard_get(self) -> dict[str, Any]:
        s = self.settings
        return {"tap_hold_ms": s.tap_hold_ms, "type_delay_ms": s.type_delay_ms,
                "layout": s.layout, "max_hold_ms": s.max_hold_ms}

    @extension(COMPUTER_KEYBOARD, op="set")
    async def computer_keyboard_set(self, tap_hold_ms: int | None = None,
                                    type_delay_ms: int | None = None,
                                    layout: str | None = None,
                                    max_hold_ms: int | None = None) -> dict[str, Any]:
        given = {"tap_hold_ms": tap_hold_ms, "type_delay_ms": type_delay_ms,
                 "max_hold_ms": max_hold_ms}
        for name, value in given.items():
            low, high = KEYBOARD_RANGES[name]
            if value is not None:
                _range(name, value, low, high)
        if layout is not None and layout not in self.layouts:
            raise Unsupported(f"this computer types in the layouts {list(self.layouts)}, not "
                              f"{layout!r}")
        changed: dict[str, Any] = {**given, "layout": layout}
        for name, setting in changed.items():
            if setting is not None:
                setattr(self.settings, name, setting)
        return await self.computer_keyboard_get()

    def _display_data(self, display: Display) -> dict[str, Any]:
        return {"width": display.width, "height": display.height, "scale": display.scale,
                "modes": [list(m) for m in self.display_modes]}

    @extension(COMPUTER_EXEC, op="run",
               description="Run a command in the desktop session as its user; a repeated "
                           "request_id returns the first result.")
    async def computer_exec_run(self, argv: list[str], request_id: str, cwd: str | None = None,
                                env: dict[str, str] | None = None,
                                timeout_s: float | None = None) -> dict[str, Any]:
        if not (isinstance(argv, list) and argv and all(isinstance(a, str) for a in argv)):
            raise InvalidArgument("argv is a non-empty list of strings; name a shell to use "
                                  "one: ['bash', '-lc', '...']")
        if not (isinstance(request_id, str) and request_id):
            raise InvalidArgument("request_id is a non-empty string")
        timeout = self.settings.exec_timeout_s if timeout_s is None else timeout_s
        if not 0 < timeout <= MAX_EXEC_TIMEOUT_S:
            raise InvalidArgument(f"timeout_s is above 0 and at most {MAX_EXEC_TIMEOUT_S}")
        if request_id in self._commands:
            return dict(await asyncio.shield(self._commands[request_id]))
        task = asyncio.ensure_future(self._exec(argv, cwd, env, timeout))
        self._commands[request_id] = task
        return dict(await asyncio.shield(task))

    async def _exec(self, argv: list[str], cwd: str | None, env: dict[str, str] | None,
                    timeout: float) -> dict[str, Any]:
        result = await self.call("run_in_session", argv, cwd, env, timeout)
        if not isinstance(result, ExecResult):
            raise Internal(f"@run_in_session returned {type(result).__name__}")
        cap = self.settings.exec_output_bytes
        return {"exit_code": result.exit_code,
                "stdout": result.stdout[:cap].decode("utf-8", errors="replace"),
                "stderr": result.stderr[:cap].decode("utf-8", errors="replace"),
                "truncated": result.truncated or max(len(result.stdout),
                                                     len(result.stderr)) > cap,
                "timed_out": result.timed_out}

    # -- data plane: files under the session user's home -------------------------------------
    @add_data
    async def computer_add_files(self, parts: list[Any]) -> None:
        """Write each file part under the session user's home, at its ``name``."""
        from ..parts import FilePart

        files: dict[str, bytes] = {}
        for part in parts:
            if not isinstance(part, FilePart):
                raise InvalidArgument("data/add takes file parts here")
            name = part.file.name or ""
            if not name or name.startswith("/") or ".." in name.split("/"):
                raise InvalidArgument(f"a file part's name is a path under the home folder, "
                                      f"not {name!r}")
            files[name] = part.file.read()
        await self.call("write_files", files)

    @get_data
    async def computer_get_files(self) -> dict[str, Any]:
        """The files ``data_paths`` names (those that exist), inline."""
        from ..parts import FileContent, FilePart

        home = self.session_home()
        parts = []
        for relative in self.settings.data_paths:
            path = home / relative
            if path.is_file():
                parts.append(FilePart(FileContent(
                    base64.b64encode(path.read_bytes()).decode("ascii"), name=relative)))
        return {"parts": parts}

    @reset_data
    async def computer_reset(self) -> None:
        return None

    # -- Linux defaults ------------------------------------------------------------------------
    @default_for("run_in_session", os="linux")
    async def _linux_run_in_session(self, argv: list[str], cwd: str | None,
                                    env: dict[str, str] | None, timeout_s: float) -> ExecResult:
        process = await asyncio.create_subprocess_exec(
            *argv, cwd=cwd or os.path.expanduser("~"), env={**os.environ, **(env or {})},
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        try:
            out, err = await asyncio.wait_for(process.communicate(), timeout_s)
        except TimeoutError:
            process.kill()
            out, err = await process.communicate()
            return ExecResult(None, out, err, timed_out=True)
        return ExecResult(process.returncode, out, err)

    @default_for("write_files", os="linux")
    async def _linux_write_files(self, files: dict[str, bytes]) -> None:
        home = self.session_home()
        for name, data in files.items():
            target = home / posixpath.normpath(name)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)

    # -- the card --------------------------------------------------------------------------------
    def agentenv_registry(self) -> Any:
        """The registry without the tools of a group this computer lacks."""
        registry = super().agentenv_registry()
        for group, names in GROUP_TOOLS.items():
            if not self.has(group):
                for name in names:
                    registry.tools.pop(name, None)
        return registry

    def agentenv_card(self) -> dict[str, Any]:
        card = super().agentenv_card()
        extensions = card["capabilities"].get("extensions") or []
        if not self.has("run_in_session"):
            extensions = [e for e in extensions if e["uri"] != COMPUTER_EXEC]
        if not self.has("keyboard"):
            extensions = [e for e in extensions if e["uri"] != COMPUTER_KEYBOARD]
        extensions += [{"uri": e.uri, "description": e.description, "params": e.params,
                        "required": e.required} for e in self.declared_extensions()]
        card["capabilities"]["extensions"] = extensions
        return card

    def declared_extensions(self) -> list[ExtensionInfo]:
        """computer/v1 with the features, and computer-pointer/v1 with the pointer group."""
        features = {"buttons": list(self.buttons), "max_click_count": self.max_click_count,
                    "keys": self.keys if self.keys == "all" else list(self.keys),
                    "max_text_length": self.max_text_length, "max_wait_ms": self.max_wait_ms,
                    "max_drag_points": self.max_drag_points,
                    "max_duration_ms": self.max_duration_ms,
                    "max_key_repeat": self.max_key_repeat,
                    "max_scroll_amount": self.max_scroll_amount, "delivery": "foreground",
                    "platform": self.platform.as_dict(), "supports": list(self.supports)}
        declared = [ExtensionInfo(COMPUTER, "The seven computer_* tools: screenshot, click, "
                                  "drag, scroll, type, key, wait.", features)]
        if self.has("pointer"):
            declared.append(ExtensionInfo(
                COMPUTER_POINTER, "The computer_pointer_* tools, and click and scroll at the "
                "pointer.", {"buttons": list(self.buttons), "kinds": ["foreground"]}))
        return declared

    @classmethod
    def declaration(cls, platform: Platform) -> dict[str, Any]:
        """The card this class serves on ``platform`` with default settings, built without
        its own ``__init__`` (what a ``computer_driver`` env records at put)."""
        driver = cls.__new__(cls)
        ComputerDriverEnvironment.__init__(driver, settings=ComputerSettings(),
                                           platform=platform)
        return driver.agentenv_card()


def _send(data: dict[str, Any], image: tuple[Frame, str, int | None] | None = None,
          ) -> dict[str, Any]:
    """A tool result: the summary as text, then the image, and the data as structured
    content."""
    content: list[dict[str, Any]] = [{"type": "text", "text": data["summary"]}]
    if image is not None:
        frame, fmt, quality = image
        encoded = png(frame.image) if fmt == "png" else jpeg(frame.image, quality or 75)
        content.append({"type": "image", "data": base64.b64encode(encoded).decode("ascii"),
                        "mimeType": f"image/{fmt}"})
    return {"content": content, "structuredContent": data, "isError": False}


def _range(name: str, value: Any, low: int, high: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise InvalidArgument(f"{name} is from {low} to {high} on this computer, got {value!r}")


def computer_driver(name: str | None = None, *,
                    supports: list[dict[str, Any]] | None = None) -> Callable[[type], type]:
    """Name a driver (its card's name unless ``ENVIRONMENT_NAME`` gives one) and declare the
    platforms it supports."""
    def wrap(cls: type) -> type:
        if not (isinstance(cls, type) and issubclass(cls, ComputerDriverEnvironment)):
            raise TypeError("@computer_driver decorates a ComputerDriverEnvironment subclass")
        if supports is not None:
            cls.supports = list(supports)
        return environment_card(name=name)(cls) if name else cls
    return wrap
