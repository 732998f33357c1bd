"""The harbor plugin's own settings: the ``[plugins.agentenv-framework-harbor]`` table.

``image_map``: base images to rewrite at import, ``{"FROM" = "TO"}`` (``bundle import harbor
--image-map FROM=TO`` adds to it, and wins): so a user behind a registry mirror runs public
datasets whose Dockerfiles name images the machine cannot pull.
"""

from __future__ import annotations

from typing import Any

import attrs

from agent_env.api import build_settings, current

TABLE = "[plugins.agentenv-framework-harbor]"
STATE_KEY = "harbor"


def _image_map(value: Any) -> dict[str, str]:
    if not isinstance(value, dict) or not all(
            isinstance(k, str) and k and isinstance(v, str) and v for k, v in value.items()):
        raise ValueError("image_map must be a table of \"FROM\" = \"TO\" image names")
    return dict(value)


@attrs.frozen(kw_only=True)
class HarborSettings:
    image_map: dict[str, str] = attrs.field(factory=dict, converter=_image_map)


def configure(settings: dict[str, Any]) -> None:
    current().state[STATE_KEY] = build_settings(HarborSettings, settings, where=TABLE,
                                                what="the harbor plugin")


def harbor_settings() -> HarborSettings:
    found = current().state.get(STATE_KEY)
    return found if isinstance(found, HarborSettings) else HarborSettings()
