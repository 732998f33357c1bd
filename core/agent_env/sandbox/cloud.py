"""What cloud sandbox providers share: timed commands, creates that leak nothing, deletes that
retry.

Why in the core: every provider of a billed service (daytona, e2b, boxd, vercel, ...) must
keep the same promises, and plugins may not import each other. A command given a timeout is
killed by coreutils ``timeout`` inside the sandbox and reported as exit code 124 with "timed
out after Ns"; a create that fails or is cancelled leaves nothing running (what it may have
made is found and deleted); a delete is retried before it is reported.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import TypeAlias, TypeVar

from agent_env.sandbox.base import ExecResult

T = TypeVar("T")
#: Which errors a rule is about: exception classes, or a test of the error (an HTTP status).
Errors: TypeAlias = tuple[type[BaseException], ...] | Callable[[BaseException], bool]

TIMEOUT_EXIT_CODE = 124
#: Seconds between the ``timeout`` signal and the kill of a command that ignores it.
KILL_GRACE = 5
#: How long a cancelled create may take to answer before what it made is looked up instead.
ABANDONED_CREATE_WAIT = 300.0


def missing_sdk(module: str, extra: str, what: str | None = None) -> str | None:
    """A provider's ``availability()`` when its SDK is an extra: None when ``module`` imports,
    else the one line naming the extra to install (nothing is imported to find out)."""
    import importlib.util

    if importlib.util.find_spec(module) is None:
        return (f"the {what or module} SDK is not installed "
                f"(pip install 'agentenv-framework[{extra}]')")
    return None


def timed_argv(command: str | list[str], timeout: float | None, *,
               shell: str = "bash") -> list[str]:
    """The argv of ``command`` (a string runs in ``shell -c``), killed after ``timeout``."""
    argv = [shell, "-c", command] if isinstance(command, str) else list(command)
    if timeout:
        argv = ["timeout", "-k", str(KILL_GRACE), f"{timeout:g}", *argv]
    return argv


def timed_result(code: int, stdout: str, stderr: str, timeout: float | None) -> ExecResult:
    """What a command run through :func:`timed_argv` did, saying so when it timed out."""
    if timeout and code == TIMEOUT_EXIT_CODE:
        stderr = f"{stderr}timed out after {timeout:g}s"
    return ExecResult(code, stdout, stderr)


def backoff(attempt: int, error: BaseException) -> float:
    """1, 2, 4, 8 ... seconds, or the server's ``Retry-After`` when the error carries one."""
    headers = getattr(error, "headers", None) or {}
    for key, value in dict(headers).items():
        if str(key).lower() == "retry-after":
            with contextlib.suppress(TypeError, ValueError):
                return min(float(value), 30.0)
    return float(2 ** attempt)


def _matches(errors: Errors, error: BaseException) -> bool:
    return isinstance(error, errors) if isinstance(errors, tuple) else errors(error)


async def create_without_leaks(
    make: Callable[[], Awaitable[T]],
    reclaim: Callable[[T | None], Awaitable[None]],
    *,
    retry_on: Errors = (),
    made_nothing: Errors = (),
    attempts: int = 5,
    delay: Callable[[int, BaseException], float] = backoff,
) -> T:
    """``await make()``, leaving nothing behind whatever happens.

    ``retry_on`` errors (rate limits) are tried ``attempts`` times in all, ``delay`` apart,
    then raised. A ``made_nothing`` error (refused credentials, a bad request) is raised as it is.
    Any other failure calls ``reclaim(None)``, which finds and deletes what the create may have
    made (by its unique name or label), then is raised. A cancelled caller gets its
    ``CancelledError`` once the create has answered and ``reclaim`` got what it made (or
    None), so Ctrl-C never leaves a billed sandbox running.
    """
    for attempt in range(attempts):
        task = asyncio.ensure_future(make())
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            await asyncio.shield(_reclaim_abandoned(task, reclaim))
            raise
        except BaseException as exc:
            if _matches(retry_on, exc) and attempt + 1 < attempts:
                await asyncio.sleep(delay(attempt, exc))
                continue
            if not (_matches(retry_on, exc) or _matches(made_nothing, exc)):
                await asyncio.shield(reclaim(None))
            raise
    raise AssertionError("unreachable")


async def _reclaim_abandoned(task: asyncio.Future[T],
                             reclaim: Callable[[T | None], Awaitable[None]]) -> None:
    try:
        made = await asyncio.wait_for(task, ABANDONED_CREATE_WAIT)
    except BaseException:
        await reclaim(None)
        return
    await reclaim(made)


async def delete_with_retries(delete: Callable[[], Awaitable[object]], *,
                              retry_on: tuple[type[BaseException], ...],
                              gone: Errors = (), attempts: int = 5) -> BaseException | None:
    """Run ``delete`` until it succeeds or fails with a ``gone`` error (the sandbox is gone
    already); other ``retry_on`` errors are retried (0.5, 1, 2, 4 s). Returns the last error
    when every attempt failed (the caller reports it, naming the sandbox), else None."""
    error: BaseException | None = None
    for attempt in range(attempts):
        try:
            await delete()
            return None
        except retry_on as exc:
            if _matches(gone, exc):
                return None
            error = exc
        if attempt + 1 < attempts:
            await asyncio.sleep(0.5 * 2 ** attempt)
    return error
