"""``moto_server`` handling one request at a time: ``python moto_serial_server.py -H HOST -p PORT``.

Why not the plain ``moto_server`` script: moto runs ``TransactWriteItems`` by deep-copying every
table it touches and copying it back when a condition fails. With the script's threaded server,
a transaction that fails restores its copy over writes other requests made meanwhile, so
concurrent writers lose each other's data: an emulator artifact, since DynamoDB transactions
are isolated. Serving requests one at a time makes each moto request atomic, as each AWS request
is; everything else is moto's own server (``moto.server.main``) with its arguments.
"""

from __future__ import annotations

import sys
import threading
from typing import Any

from moto.moto_server.werkzeug_app import DomainDispatcherApplication

_ONE_AT_A_TIME = threading.Lock()
_dispatch = DomainDispatcherApplication.__call__


def _serial(self: Any, environ: dict[str, Any], start_response: Any) -> Any:
    with _ONE_AT_A_TIME:
        return _dispatch(self, environ, start_response)


DomainDispatcherApplication.__call__ = _serial  # type: ignore[method-assign]

if __name__ == "__main__":
    from moto.server import main

    main(sys.argv[1:])
