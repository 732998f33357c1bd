"""The quick check of a plugin's requirement on the core agrees with packaging's."""

from __future__ import annotations

import itertools

import pytest
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from agent_env.plugins.discovery import _simple_contains

SPECIFIERS = [">=0.1,<0.2", ">=0.1", "<0.1", "==0.1", "==0.1.0", "!=0.1", ">0.1", "<=0.1",
              ">=1", "<0.2,>=0.1.5", ">=0.1,!=0.1.3"]
VERSIONS = ["0.1.0", "0.1", "0.1.5", "0.1.3", "0.2", "0.0.9", "1.0", "0.1.10", "10.0"]


@pytest.mark.parametrize(("specifier", "version"), list(itertools.product(SPECIFIERS, VERSIONS)))
def test_same_verdict_as_packaging(specifier: str, version: str) -> None:
    expected = SpecifierSet(specifier).contains(Version(version), prereleases=True)
    assert _simple_contains(specifier, version) == expected


@pytest.mark.parametrize(("specifier", "version"), [
    ("~=0.1", "0.1.2"), (">=0.1", "0.2.0rc1"), (">=0.1.*", "0.1"), ("===0.1", "0.1"),
])
def test_anything_else_is_left_to_packaging(specifier: str, version: str) -> None:
    assert _simple_contains(specifier, version) is None
