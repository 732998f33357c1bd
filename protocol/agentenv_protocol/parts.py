"""A2A-shaped parts carried by the data plane (``data/add``, ``data/get``).

Parts are discriminated by ``kind``; the wire shape omits nulls. Parsing validates so that the
server can answer ``-32602`` with a precise ``detail``.
"""

from __future__ import annotations

import builtins
from collections.abc import Mapping
from typing import Any

import attrs

KINDS = ("text", "file", "data")


class PartError(ValueError):
    """A part that does not have the A2A shape."""


@attrs.define(frozen=True)
class FileContent:
    """A file inline (base64 ``bytes``) or by reference (``file://`` or ``https://`` ``uri``)."""

    bytes: str | None = None
    uri: str | None = None
    mime_type: str | None = None
    name: str | None = None

    def read(self) -> builtins.bytes:
        """The file's bytes: decoded when inline, read from disk for a ``file://`` uri (how
        AgentEnv seeds an env server with an environment artifact). An ``https://`` uri is the
        caller's to fetch: ValueError, as for anything else."""
        import base64
        from urllib.parse import unquote, urlsplit

        if self.bytes is not None:
            return base64.b64decode(self.bytes)
        parts = urlsplit(self.uri or "")
        if parts.scheme == "file" and parts.netloc in ("", "localhost"):
            with open(unquote(parts.path), "rb") as handle:
                return handle.read()
        raise ValueError(f"cannot read a file part with uri {self.uri!r} here (inline bytes or "
                         "a file:// uri)")

    def to_wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.bytes is not None:
            out["bytes"] = self.bytes
        if self.uri is not None:
            out["uri"] = self.uri
        if self.mime_type is not None:
            out["mimeType"] = self.mime_type
        if self.name is not None:
            out["name"] = self.name
        return out


@attrs.define(frozen=True)
class TextPart:
    text: str
    metadata: dict[str, Any] | None = None
    kind: str = attrs.field(default="text", init=False)

    def to_wire(self) -> dict[str, Any]:
        return _with_meta({"kind": "text", "text": self.text}, self.metadata)


@attrs.define(frozen=True)
class FilePart:
    file: FileContent
    metadata: dict[str, Any] | None = None
    kind: str = attrs.field(default="file", init=False)

    def to_wire(self) -> dict[str, Any]:
        return _with_meta({"kind": "file", "file": self.file.to_wire()}, self.metadata)


@attrs.define(frozen=True)
class DataPart:
    data: dict[str, Any]
    metadata: dict[str, Any] | None = None
    kind: str = attrs.field(default="data", init=False)

    def to_wire(self) -> dict[str, Any]:
        return _with_meta({"kind": "data", "data": self.data}, self.metadata)


Part = TextPart | FilePart | DataPart


def _with_meta(out: dict[str, Any], metadata: dict[str, Any] | None) -> dict[str, Any]:
    if metadata is not None:
        out["metadata"] = metadata
    return out


def part_from_wire(raw: Any, index: int = 0) -> Part:
    """Parse one wire part, raising PartError naming what is wrong."""
    where = f"parts[{index}]"
    if not isinstance(raw, Mapping):
        raise PartError(f"{where} must be an object")
    kind = raw.get("kind")
    metadata = raw.get("metadata")
    if metadata is not None and not isinstance(metadata, Mapping):
        raise PartError(f"{where}.metadata must be an object")
    metadata = dict(metadata) if metadata is not None else None
    if kind == "text":
        text = raw.get("text")
        if not isinstance(text, str):
            raise PartError(f"{where}.text must be a string")
        return TextPart(text, metadata)
    if kind == "data":
        data = raw.get("data")
        if not isinstance(data, Mapping):
            raise PartError(f"{where}.data must be an object")
        return DataPart(dict(data), metadata)
    if kind == "file":
        f = raw.get("file")
        if not isinstance(f, Mapping):
            raise PartError(f"{where}.file must be an object")
        content = {k: f.get(k) for k in ("bytes", "uri", "mimeType", "name")}
        for key, value in content.items():
            if value is not None and not isinstance(value, str):
                raise PartError(f"{where}.file.{key} must be a string")
        if (content["bytes"] is None) == (content["uri"] is None):
            raise PartError(f"{where}.file needs exactly one of bytes or uri")
        return FilePart(
            FileContent(content["bytes"], content["uri"], content["mimeType"], content["name"]),
            metadata,
        )
    raise PartError(f"{where}.kind must be one of {list(KINDS)}, got {kind!r}")


def parts_from_wire(raw: Any) -> list[Part]:
    """Parse ``params.parts`` of ``data/add``: a non-empty list of parts."""
    if not isinstance(raw, list):
        raise PartError("parts must be a list")
    if not raw:
        raise PartError("parts must hold at least one part")
    return [part_from_wire(p, i) for i, p in enumerate(raw)]


def part_to_wire(part: Any) -> dict[str, Any]:
    """Serialise a part given as one of our classes, a wire dict, or any object with model_dump."""
    if isinstance(part, (TextPart, FilePart, DataPart)):
        return part.to_wire()
    if isinstance(part, Mapping):
        return {k: v for k, v in part.items() if v is not None}
    dump = getattr(part, "model_dump", None)
    if callable(dump):  # an a2a/pydantic part, as envs written for the reference return
        data = dump(mode="json", exclude_none=True, by_alias=True)
        return data.get("root", data) if isinstance(data, dict) else data
    if isinstance(part, str):
        return {"kind": "text", "text": part}
    raise TypeError(f"cannot serialise part {part!r}")
