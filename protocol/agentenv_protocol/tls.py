"""aiohttp's default TLS contexts, given their CA certificates when a connection first needs them.

Why: aiohttp builds two client TLS contexts when ``aiohttp.connector`` is imported, and loading
the system's CA certificates into them costs about 60 ms of CPU and 2-4 MiB of memory in every
process that imports it: each env server, each gateway and the CLI, though most of them never
open a TLS connection (issue 39). :func:`defer_aiohttp_certificates`, called before aiohttp is
imported (``import agentenv_protocol`` calls it), lets aiohttp build its contexts without the
certificates and loads them the first time aiohttp picks one of those contexts for an https
request. The checks a TLS connection makes are unchanged; only the loading moves, to that
first request, which waits the 60 ms once (on the event loop, as any other work of it).

It touches nothing when aiohttp is imported already, and changes nothing (the certificates are
loaded at import, as without it) when aiohttp no longer picks its contexts in
``TCPConnector._get_ssl_context``, the one place that hands them out.
"""

from __future__ import annotations

import importlib.util
import sys
import threading
from collections.abc import Callable, Sequence
from types import FrameType, ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from importlib.machinery import ModuleSpec

CONNECTOR = "aiohttp.connector"
#: The certificate loads aiohttp's import skipped: (context, the skipped method, its args).
_deferred: list[tuple[Any, Callable[..., Any], tuple[Any, ...]]] = []
_lock = threading.Lock()


def defer_aiohttp_certificates() -> bool:
    """Defer the CA loading of aiohttp's default contexts (see the module); False when it is
    too late (aiohttp imported) or there is no ``ssl``."""
    if CONNECTOR in sys.modules or any(isinstance(f, _ConnectorFinder) for f in sys.meta_path):
        return False
    # Nothing is imported here (not even ssl): this runs in every process that imports
    # agentenv_protocol, most of which never load aiohttp.
    sys.meta_path.insert(0, _ConnectorFinder())
    return True


def load_deferred() -> int:
    """Load the certificates aiohttp's import skipped (once); how many loads ran now."""
    with _lock:
        pending = _deferred[:]
        _deferred.clear()
        for context, method, args in pending:
            method(context, *args)
        return len(pending)


class _ConnectorFinder:
    """A meta path finder (``importlib.abc`` itself costs 18 ms to import, so none is
    subclassed) that wraps the loading of ``aiohttp.connector`` in :func:`_skipping_loads`."""

    def find_spec(self, name: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> ModuleSpec | None:
        if name != CONNECTOR:
            return None
        sys.meta_path.remove(self)  # once: the real finders find it
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        real_exec = spec.loader.exec_module

        def exec_module(module: ModuleType) -> None:
            _skipping_loads(lambda: real_exec(module))
            _hand_out_loaded(module)

        spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def _skipping_loads(run: Callable[[], None]) -> None:
    """Run ``run`` (the connector's import) with the CA loads it makes itself recorded instead
    of run; a load from anywhere else (another thread) runs as usual."""
    try:
        import ssl
    except ImportError:  # no TLS at all: nothing to defer
        run()
        return

    originals = {name: getattr(ssl.SSLContext, name)
                 for name in ("load_default_certs", "set_default_verify_paths")}

    def skipping(name: str) -> Callable[..., Any]:
        real = originals[name]

        def method(self: Any, *args: Any) -> Any:
            caller: FrameType | None = sys._getframe(1)
            while caller is not None and caller.f_globals.get("__name__") == "ssl":
                caller = caller.f_back  # create_default_context calls load_default_certs
            if caller is None or caller.f_globals.get("__name__") != CONNECTOR:
                return real(self, *args)
            with _lock:
                _deferred.append((self, real, args))
            return None

        return method

    for name in originals:
        setattr(ssl.SSLContext, name, skipping(name))
    try:
        run()
    finally:
        for name, real in originals.items():
            setattr(ssl.SSLContext, name, real)


def _hand_out_loaded(module: ModuleType) -> None:
    """Load the skipped certificates before the connector first hands out a context; at once
    when there is no such method to wrap (another aiohttp)."""
    connector = getattr(module, "TCPConnector", None)
    pick = getattr(connector, "_get_ssl_context", None)
    if connector is None or pick is None:
        load_deferred()
        return

    def _get_ssl_context(self: Any, req: Any) -> Any:
        if _deferred:
            is_ssl = getattr(req, "is_ssl", None)
            if is_ssl is None or is_ssl():  # a plain http request needs no context
                load_deferred()
        return pick(self, req)

    connector._get_ssl_context = _get_ssl_context
