"""The agents plugin's hook implementations (none yet: the model gateway and the scripted model
are wired into runs by the kernel's agent types; hooks land here as they are added).

Cheap to import on purpose (the CLI imports every plugin at start): nothing here imports aiohttp.
"""

from __future__ import annotations
