"""Discovery's own entry-point scan finds what importlib.metadata finds, without its cost."""

from __future__ import annotations

import subprocess
import sys
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


def test_starting_the_cli_does_not_import_importlib_metadata() -> None:
    code = ("import sys; from agent_env.cli.main import main\n"
            "try:\n    main(['plugin', 'list', '--json'])\nexcept SystemExit:\n    pass\n"
            "print('importlib.metadata' in sys.modules, file=sys.stderr)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)
    assert done.stderr.strip().splitlines()[-1] == "False", done.stderr
