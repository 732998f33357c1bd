"""Frames: each screenshot is a frame an agent points into later, by id.

A point is given in a frame's pixels (``space="frame"``) or on a grid over it (``"norm"``,
0 to ``norm_scale``) and mapped to screen pixels through the frame: its origin (a crop's
offset) and the display's scale then. A frame taken at another display size is stale: input
aimed through it is refused rather than landing somewhere else.
"""

from __future__ import annotations

import datetime as dt
import itertools
from collections import OrderedDict
from typing import Any

import attrs

from .errors import InvalidArgument, OutOfBounds, StaleFrame
from .operations import Display, Image

#: Frames kept (oldest dropped first): enough for an agent's crops of its latest screenshots.
KEPT = 16


@attrs.define
class Frame:
    id: str
    image: Image = attrs.field(repr=False)
    display: Display
    captured_at: str
    parent: str | None = None
    origin: tuple[int, int] = (0, 0)

    @property
    def width(self) -> int:
        return self.image.width

    @property
    def height(self) -> int:
        return self.image.height

    def to_screen(self, fx: float, fy: float) -> tuple[int, int]:
        scale = self.display.scale or 1.0
        return (round((self.origin[0] + fx) / scale), round((self.origin[1] + fy) / scale))

    def from_screen(self, sx: float, sy: float) -> tuple[int, int]:
        scale = self.display.scale or 1.0
        return (round(sx * scale) - self.origin[0], round(sy * scale) - self.origin[1])

    def contains(self, fx: float, fy: float) -> bool:
        return 0 <= fx < self.width and 0 <= fy < self.height

    def data(self) -> dict[str, Any]:
        """The frame as tool results give it."""
        out: dict[str, Any] = {
            "frame_id": self.id, "width": self.width, "height": self.height,
            "display": {"width": self.display.width, "height": self.display.height,
                        "scale": self.display.scale},
            "captured_at": self.captured_at}
        if self.parent:
            out["parent_frame_id"] = self.parent
        return out


class Frames:
    """The frames of one driver, and each caller's latest."""

    def __init__(self) -> None:
        self._frames: OrderedDict[str, Frame] = OrderedDict()
        self._latest: dict[str, str] = {}
        self._ids = itertools.count(1)

    def add(self, image: Image, display: Display, *, identity: str,
            parent: Frame | None = None, origin: tuple[int, int] = (0, 0)) -> Frame:
        now = dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds")
        frame = Frame(f"f-{next(self._ids)}", image, display, now,
                      parent.id if parent else None, origin)
        self._frames[frame.id] = frame
        while len(self._frames) > KEPT:
            self._frames.popitem(last=False)
        self._latest[identity] = frame.id
        return frame

    def latest(self, identity: str) -> Frame | None:
        return self._frames.get(self._latest.get(identity, ""))

    def get(self, frame_id: str | None, identity: str) -> Frame:
        """The frame named, or the caller's latest; a clear error when there is none."""
        if frame_id is None:
            frame = self.latest(identity)
            if frame is None:
                raise InvalidArgument("take a screenshot first: points are given in a frame's "
                                      "pixels (computer_screenshot)")
            return frame
        frame = self._frames.get(frame_id)
        if frame is None:
            raise StaleFrame(f"no frame {frame_id!r} is kept (the last {KEPT} are); take a "
                             "new screenshot")
        return frame

    @staticmethod
    def check_current(frame: Frame, now: Display) -> None:
        if (now.width, now.height) != (frame.display.width, frame.display.height):
            raise StaleFrame(f"the display is {now.width}x{now.height} now; {frame.id} was "
                             f"taken at {frame.display.width}x{frame.display.height}: take a "
                             "new screenshot")


def frame_point(frame: Frame, x: float, y: float, space: str,
                norm_scale: int) -> tuple[float, float]:
    """``(x, y)`` in ``space`` as a pixel of ``frame``; OutOfBounds when it is outside."""
    if space == "norm":
        if not (0 <= x <= norm_scale and 0 <= y <= norm_scale):
            raise OutOfBounds(f"({x:g}, {y:g}) is outside the norm grid 0 to {norm_scale}")
        fx, fy = x * frame.width / norm_scale, y * frame.height / norm_scale
        return min(fx, frame.width - 1), min(fy, frame.height - 1)
    if not frame.contains(x, y):
        raise OutOfBounds(f"({x:g}, {y:g}) is outside {frame.id}, which is "
                          f"{frame.width}x{frame.height} (x from 0 to {frame.width - 1}, "
                          f"y from 0 to {frame.height - 1})")
    return x, y


def frame_region(frame: Frame, region: Any, space: str,
                 norm_scale: int) -> tuple[int, int, int, int]:
    """A crop box ``[x0, y0, x1, y1]`` in ``space`` as frame pixels, inside the frame."""
    if not (isinstance(region, list) and len(region) == 4
            and all(isinstance(v, (int, float)) for v in region)):
        raise InvalidArgument("region is [x0, y0, x1, y1]")
    x0, y0 = frame_point(frame, region[0], region[1], space, norm_scale)
    if space == "norm":
        x1, y1 = region[2] * frame.width / norm_scale, region[3] * frame.height / norm_scale
    else:
        x1, y1 = region[2], region[3]
    if not (x0 < x1 <= frame.width and y0 < y1 <= frame.height):
        raise OutOfBounds(f"region {region} is empty or leaves {frame.id} "
                          f"({frame.width}x{frame.height})")
    return int(x0), int(y0), round(x1), round(y1)
