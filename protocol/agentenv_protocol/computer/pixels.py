"""Captures as PNG, with the standard library only: raw pixels are turned into RGB rows and
deflated (level 1: a 1280x800 desktop encodes in tens of milliseconds), so a driver image needs
no imaging library. JPEG needs Pillow where the driver runs."""

from __future__ import annotations

import struct
import zlib

from .errors import InvalidArgument, Unsupported
from .operations import Image

_BYTES = {"RGB": 3, "RGBA": 4, "BGRA": 4, "BGRX": 4}


def rgb(image: Image) -> bytes:
    """``image``'s pixels as packed RGB."""
    size = _BYTES.get(image.mode)
    if size is None:
        raise Unsupported(f"a {image.mode} capture cannot be cropped or re-encoded here; "
                          "capture raw pixels (RGB, RGBA, BGRA or BGRX)")
    data = image.data
    if len(data) < image.width * image.height * size:
        raise InvalidArgument(f"a {image.width}x{image.height} {image.mode} capture holds "
                              f"{len(data)} bytes, too few")
    if image.mode == "RGB":
        return bytes(data[:image.width * image.height * 3])
    out = bytearray(image.width * image.height * 3)
    red, blue = (2, 0) if image.mode.startswith("BGR") else (0, 2)
    out[0::3] = data[red::4][:image.width * image.height]
    out[1::3] = data[1::4][:image.width * image.height]
    out[2::3] = data[blue::4][:image.width * image.height]
    return bytes(out)


def crop(image: Image, box: tuple[int, int, int, int]) -> Image:
    """The ``(x0, y0, x1, y1)`` part of ``image``, as RGB."""
    x0, y0, x1, y1 = box
    pixels = rgb(image)
    row = image.width * 3
    rows = [pixels[y * row + x0 * 3:y * row + x1 * 3] for y in range(y0, y1)]
    return Image(x1 - x0, y1 - y0, b"".join(rows), "RGB")


def png(image: Image, level: int = 1) -> bytes:
    """``image`` as PNG bytes (a PNG capture is passed through)."""
    if image.mode == "png":
        return bytes(image.data)
    pixels = rgb(image)
    row = image.width * 3
    raw = b"".join(b"\x00" + pixels[y * row:(y + 1) * row] for y in range(image.height))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))

    header = struct.pack(">IIBBBBB", image.width, image.height, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header)
            + chunk(b"IDAT", zlib.compress(raw, level)) + chunk(b"IEND", b""))


def jpeg(image: Image, quality: int) -> bytes:
    if image.mode == "jpeg":
        return bytes(image.data)
    import importlib

    try:
        pil = importlib.import_module("PIL.Image")
    except ImportError:
        raise Unsupported("jpeg screenshots need Pillow where the driver runs; ask for png")\
            from None
    import io

    out = io.BytesIO()
    pil.frombytes("RGB", (image.width, image.height), rgb(image)).save(
        out, "JPEG", quality=quality)
    return out.getvalue()
