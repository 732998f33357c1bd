"""Object keys: what is refused and why (path traversal, ambiguity between backends)."""

from __future__ import annotations

import pytest

from agent_env.errors import UserError
from agent_env.stores.base import InvalidObjectKey, validate_key, validate_prefix
from agent_env.testing.store_conformance.object import BAD_KEYS

GOOD_KEYS = ["a", "a/b/c.txt", "artifacts/@local/x/v1/hello.txt", "x..y", ".hidden/.f", "é ✓ %"]


@pytest.mark.parametrize("key", GOOD_KEYS)
def test_good_keys(key: str) -> None:
    assert validate_key(key) == key


@pytest.mark.parametrize("key", [*BAD_KEYS, "../etc/passwd", "a/b/../../..", "C:\\x", "a\x00b"])
def test_bad_keys_say_why(key: str) -> None:
    with pytest.raises(InvalidObjectKey) as caught:
        validate_key(key)
    assert isinstance(caught.value, UserError) and isinstance(caught.value, ValueError)
    assert "invalid object key" in str(caught.value)


@pytest.mark.parametrize(
    ("key", "reason"),
    [
        ("", "empty"),
        ("/etc/passwd", "absolute"),
        ("a\\b", "backslash"),
        ("a//b", "empty segment"),
        ("a/../b", "'..' segment"),
    ],
)
def test_messages(key: str, reason: str) -> None:
    with pytest.raises(InvalidObjectKey, match=reason):
        validate_key(key)


def test_non_string_keys() -> None:
    with pytest.raises(InvalidObjectKey, match="string"):
        validate_key(b"bytes")


def test_prefixes() -> None:
    for prefix in ("", "a", "a/", "a/b/", "a/b/c"):
        assert validate_prefix(prefix) == prefix
    for bad in ("/a", "../", "a//", "a/../"):
        with pytest.raises(InvalidObjectKey):
            validate_prefix(bad)
