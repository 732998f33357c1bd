"""A sandbox provider chain as people write it (``"docker,local"``: try each in turn).

Why a module of its own: the same text comes from ``--sandbox`` on seven commands, from
``[sandbox] default``, from a step's ``sandbox_type`` and from episode specs, and every one of
them must read it the same way (spaces dropped, empty names skipped, a chain naming nothing
refused). Nothing here imports more than the errors module, so the CLI may use it at start.
"""

from __future__ import annotations

from agent_env.errors import UserError


def split_chain(text: str) -> list[str]:
    """The provider names of ``text``, in order, blanks dropped."""
    return [part.strip() for part in str(text).split(",") if part.strip()]


def option_chain(text: str | None, where: str = "--sandbox") -> list[str] | None:
    """The chain an option gives (None when it was not given); one that names no provider
    (``",,,"``) is a UserError naming ``where``."""
    if text is None:
        return None
    chain = split_chain(text)
    if not chain:
        raise UserError(f"{where} {text!r} names no sandbox provider; give one or more names, "
                        "such as local or docker,local")
    return chain
