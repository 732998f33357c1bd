"""Discovery's own entry-point scan finds what importlib.metadata finds, without its cost."""

from __future__ import annotations

from importlib import metadata

from agent_env.plugins.discovery import ENTRY_POINT_GROUP, entry_points


def test_the_scan_agrees_with_importlib_metadata() -> None:
    ours = {(r.distribution, r.name, r.module, r.version, tuple(ep.dist.requires))
            for r, ep in entry_points()}
    theirs = set()
    for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
        assert ep.dist is not None
        theirs.add((ep.dist.metadata["Name"], ep.name, ep.value, ep.dist.version,
                    tuple(ep.dist.requires or ())))
    assert ours == theirs and len(ours) >= 7  # the first-party plugins of this workspace


def test_a_toy_distribution_on_the_path_is_found_and_loads(toy_site) -> None:
    toy_site("toy-scan", "VALUE = 42", requires=["agentenv-framework>=0.1", "attrs"])
    found = {r.name: ep for r, ep in entry_points()}
    assert found["toy_scan"].dist.requires == ("agentenv-framework>=0.1", "attrs")
    assert found["toy_scan"].load().VALUE == 42
