"""Start the desktop session, then the driver: ``session.py FOLDER FILE:CLASS``.

Xvfb on ``$DISPLAY`` at ``AGENTENV_DESKTOP_SIZE`` (default 1280x800), openbox, an xterm in the
home folder; once the X server answers, openbox manages it and the xterm's window is on the
screen, the driver class is served (``MCP_HOST``/``MCP_PORT``) in this process. Serving only
then is what makes a ready env the desktop the task describes: an agent's first keystrokes
otherwise reach a screen whose terminal is still starting (about a second idle, more under
load) and are lost. A part that does not come up within 20 s ends the container with one line
saying why (and Xvfb's own last words), so the deploy fails naming it.
"""

import os
import subprocess
import sys
import time
from pathlib import Path

X_WAIT_S = 20
POLL_S = 0.05


def fail(message: str) -> None:
    print(f"desktop: {message}", file=sys.stderr, flush=True)
    sys.exit(3)


def start_x() -> subprocess.Popen:
    display = os.environ.get("DISPLAY", ":1")
    size = os.environ.get("AGENTENV_DESKTOP_SIZE", "1280x800")
    log = open("/tmp/xvfb.log", "wb")  # Xvfb writes to it while it runs
    # -noreset: without it the server resets when its last client leaves, so the first
    # client after the readiness probe below could find no display (measured: 2 of 16 starts)
    xvfb = subprocess.Popen(["Xvfb", display, "-screen", "0", f"{size}x24", "-nolisten", "tcp",
                             "-ac", "-noreset"], stdout=log, stderr=subprocess.STDOUT)
    wait_for(f"the X server (Xvfb {display} {size})", ["xdpyinfo"], "", xvfb, "/tmp/xvfb.log")
    return xvfb


def says(argv: list[str], text: str) -> bool:
    """Whether the X query ``argv`` succeeds with ``text`` in what it prints."""
    done = subprocess.run(argv, capture_output=True, text=True)
    return done.returncode == 0 and text in done.stdout


def wait_for(what: str, argv: list[str], text: str, process: subprocess.Popen,
             log: str) -> None:
    """Until ``argv`` prints ``text``, failing with ``log``'s last lines if ``process`` ends,
    or when 20 s pass."""
    deadline = time.monotonic() + X_WAIT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            said = " | ".join(Path(log).read_text(errors="replace").strip().splitlines()[-3:])
            fail(f"{what} exited with code {process.returncode}: {said}")
        if says(argv, text):
            return
        time.sleep(POLL_S)
    fail(f"{what} did not come up within {X_WAIT_S} s")


def main() -> None:
    if len(sys.argv) != 3 or ":" not in sys.argv[2]:
        fail("usage: session.py FOLDER FILE:CLASS")
    folder, module = Path(sys.argv[1]), sys.argv[2]
    start_x()
    openbox = subprocess.Popen(["openbox"], stdout=open("/tmp/openbox.log", "wb"),
                               stderr=subprocess.STDOUT)
    # The terminal starts once openbox has set up the screen (_NET_WORKAREA, set after its
    # start-up; _NET_SUPPORTING_WM_CHECK comes too early): an xterm mapped during openbox's
    # start-up was measured reaching the screen 5.3 s later, one started after it in 65 ms.
    wait_for("the window manager (openbox)",
             ["xprop", "-root", "-notype", "_NET_WORKAREA"], " = ", openbox,
             "/tmp/openbox.log")
    xterm = subprocess.Popen(["xterm", "-geometry", "90x24+60+60", "-fa", "DejaVu Sans Mono",
                              "-fs", "13", "-title", "Terminal"], cwd=Path.home(),
                             stdout=open("/tmp/xterm.log", "wb"), stderr=subprocess.STDOUT)
    from agentenv_protocol.computer.run import serve_driver  # while xterm starts

    wait_for("the terminal (xterm)",
             ["xdotool", "search", "--onlyvisible", "--name", "^Terminal$"], "", xterm,
             "/tmp/xterm.log")

    file, _, name = module.partition(":")
    serve_driver(folder, file, name)


if __name__ == "__main__":
    main()
