"""Scratch folders that a killed command cannot leave behind unnoticed.

Why: a conversion, an env build context materialised from the store or an image build writes
to a temporary folder that its ``finally`` removes; ``kill -9`` (or a power cut) skips the
``finally``. Each such folder is therefore claimed in the state root first
(``<state>/scratch/<id>.json``: the folder and an ``agentenv.owner`` label naming the process),
so ``agent-env gc`` can tell a folder whose writer is gone (:func:`stale_scratch`) from one in
use, across every place the folders may live (``/tmp``, beside a bundle's output).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import attrs

RECORDS = "scratch"


def _records() -> Path:
    from agent_env.config import ensure_private_dir
    from agent_env.runtime import current

    return ensure_private_dir(current().config.state_root / RECORDS)


@contextmanager
def owned_scratch(prefix: str, parent: Path | None = None) -> Iterator[Path]:
    """A new folder (``tempfile.mkdtemp(prefix=, dir=parent)``), claimed for this process
    until the block ends, then removed with its claim. The block may move the folder away
    (a rename into place): what is left at its path is removed, nothing else."""
    from agent_env.sandbox.ownership import owner_label

    records = _records()
    folder = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    claim = records / f"{uuid.uuid4().hex}.json"
    try:
        claim.write_text(json.dumps({"path": str(folder), "owner": owner_label()}),
                         encoding="utf-8")
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        claim.unlink(missing_ok=True)


@attrs.frozen
class StaleScratch:
    """A claimed folder whose writer is gone (``folder`` None: the claim is unreadable)."""

    claim: Path
    folder: Path | None
    why: str

    def remove(self) -> None:
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
        self.claim.unlink(missing_ok=True)


def stale_scratch() -> list[StaleScratch]:
    """Every claim in this state root whose process is gone, oldest claim first. Claims of
    live processes, and of processes this host cannot judge, are left alone."""
    from agent_env.sandbox.ownership import owner_state

    found = []
    try:
        claims = sorted(_records().glob("*.json"), key=lambda p: p.stat().st_mtime)
    except OSError:
        return []
    for claim in claims:
        try:
            data = json.loads(claim.read_text(encoding="utf-8"))
            folder, owner = Path(str(data["path"])), str(data["owner"])
        except (OSError, ValueError, KeyError, TypeError):
            found.append(StaleScratch(claim, None, "an unreadable claim"))
            continue
        state = owner_state(owner)
        if state.alive is False:
            found.append(StaleScratch(claim, folder if os.path.lexists(folder) else None,
                                      state.why))
    return found
