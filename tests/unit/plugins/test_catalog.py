"""The first-party catalog says exactly what each first-party plugin contributes."""

from __future__ import annotations

import pytest

from agent_env.plugins import ACTIVE, PluginHost
from agent_env.plugins.catalog import FIRST_PARTY, FirstPartyPlugin


@pytest.mark.parametrize("plugin", FIRST_PARTY, ids=lambda p: p.short_name)
def test_the_catalog_matches_what_the_plugin_contributes(plugin: FirstPartyPlugin) -> None:
    host = PluginHost(builtin=(), only={plugin.distribution})
    host.load()
    records = [r for r in host.records if r.distribution == plugin.distribution]
    assert records, f"{plugin.distribution} is a workspace member and must be installed here"
    assert all(r.status == ACTIVE for r in records), records
    contributed: dict[str, set[str]] = {}
    for contribution in host.all_contributions():
        contributed.setdefault(contribution.kind, set()).add(contribution.name)
    declared = {kind: set(names) for kind, names in plugin.provides.items()}
    assert contributed == declared
