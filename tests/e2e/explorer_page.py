"""The explorer's page of one run, opened in Debian's Chromium (Playwright drives it): what the
browser and desktop runs' tests read from it."""

from __future__ import annotations

import os
import re
import shutil
from typing import Any

import pytest

CHROMIUM = os.environ.get("AGENTENV_CHROMIUM", "/usr/bin/chromium")


def screenshots_on_run_page(agent_env: Any, instance: str) -> tuple[list[list[int]], str]:
    """``agent-env up`` on ``agent_env``'s state, the run's page in Chromium: each transcript
    image's natural size once decoded, and the stored transcript's text."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("playwright is not installed (./dev setup installs the explorer's extra)")
    assert shutil.which(CHROMIUM), f"no Chromium at {CHROMIUM} (bash .ci/chromium.sh)"
    up = agent_env.start("up", "--port", "0")
    try:
        found = re.search(r"Explorer: (http://127\.0\.0\.1:\d+/\?token=\S+)",
                          up.stdout.readline())
        assert found, up.stderr.read()
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
            page = browser.new_page()
            page.goto(found.group(1) + "#/run/" + instance.replace("/", "%2F").replace(
                "@", "%40"))
            page.wait_for_selector(".stored-transcript .transcript img.shot", timeout=15_000)
            sizes = page.locator("img.shot").evaluate_all(
                "imgs => imgs.map(i => i.complete ? [i.naturalWidth, i.naturalHeight] : [0, 0])")
            text = page.inner_text(".stored-transcript")
            browser.close()
        return sizes, text
    finally:
        up.terminate()
        up.wait(timeout=10)
