"""Start the desktop session, then the driver: ``session.py FOLDER FILE:CLASS``.

Xvfb on ``$DISPLAY`` at ``AGENTENV_DESKTOP_SIZE`` (default 1280x800), openbox, an xterm in the
home folder; once the X server answers, the driver class is served (``MCP_HOST``/``MCP_PORT``)
in this process. An X server that does not come up within 20 s ends the container with one
line saying why (and Xvfb's own last words), so the deploy fails naming it.
"""

import os
import subprocess
import sys
import time
from pathlib import Path

X_WAIT_S = 20


def fail(message: str) -> None:
    print(f"desktop: {message}", file=sys.stderr, flush=True)
    sys.exit(3)


def start_x() -> subprocess.Popen:
    display = os.environ.get("DISPLAY", ":1")
    size = os.environ.get("AGENTENV_DESKTOP_SIZE", "1280x800")
    log = open("/tmp/xvfb.log", "wb")  # Xvfb writes to it while it runs
    xvfb = subprocess.Popen(["Xvfb", display, "-screen", "0", f"{size}x24", "-nolisten", "tcp",
                             "-ac"], stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + X_WAIT_S
    while time.monotonic() < deadline:
        if xvfb.poll() is not None:
            said = Path("/tmp/xvfb.log").read_text(errors="replace").strip().splitlines()[-3:]
            fail(f"the X server (Xvfb {display} {size}) exited with code {xvfb.returncode}: "
                 + " | ".join(said))
        if subprocess.run(["xdpyinfo"], capture_output=True).returncode == 0:
            return xvfb
        time.sleep(0.1)
    fail(f"the X server (Xvfb {display}) did not answer within {X_WAIT_S} s")
    raise AssertionError


def main() -> None:
    if len(sys.argv) != 3 or ":" not in sys.argv[2]:
        fail("usage: session.py FOLDER FILE:CLASS")
    folder, module = Path(sys.argv[1]), sys.argv[2]
    start_x()
    subprocess.Popen(["openbox"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    subprocess.Popen(["xterm", "-geometry", "90x24+60+60", "-fa", "DejaVu Sans Mono", "-fs",
                      "13", "-title", "Terminal"], cwd=Path.home(),
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    from agentenv_protocol.computer.run import serve_driver

    file, _, name = module.partition(":")
    serve_driver(folder, file, name)


if __name__ == "__main__":
    main()
