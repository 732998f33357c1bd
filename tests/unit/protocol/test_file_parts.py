"""FileContent.read: how an env server reads the file an environment artifact seeds it with."""

import base64
from pathlib import Path

import pytest

from agentenv_protocol.parts import FileContent, parts_from_wire


def test_inline_and_file_uri_read_the_same_bytes(tmp_path: Path) -> None:
    data = bytes(range(256))
    (tmp_path / "seed one.bin").write_bytes(data)
    inline = FileContent(bytes=base64.b64encode(data).decode())
    on_disk = FileContent(uri=(tmp_path / "seed one.bin").as_uri())
    assert inline.read() == on_disk.read() == data
    (part,) = parts_from_wire([{"kind": "file", "file": {"uri": on_disk.uri}}])
    assert part.file.read() == data


def test_other_uris_are_the_callers_to_fetch() -> None:
    with pytest.raises(ValueError, match="cannot read a file part with uri 'https://x/y'"):
        FileContent(uri="https://x/y").read()
    with pytest.raises(ValueError):
        FileContent(uri="file://elsewhere/etc/passwd").read()
