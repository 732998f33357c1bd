"""Reusable test suites for plugin authors (they import pytest; never import these at runtime)."""
