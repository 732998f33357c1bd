"""Start Playwright MCP on the env's port, with Debian's Chromium, headless and isolated.

Why a config file: the browser sends the env's site token on every request (Playwright's
``extraHTTPHeaders``), so the pages the agent opens through the gateway's ``/website/<name>/``
routes are let in without a token in any URL, page or tool result; that token opens those pages
and nothing else of the gateway.
"""

import json
import os
import tempfile

port = os.environ.get("MCP_PORT", "18765")
host = os.environ.get("MCP_HOST", "0.0.0.0")
token = os.environ.get("AGENTENV_WEBSITE_TOKEN", "")
config = {"browser": {"browserName": "chromium", "launchOptions": {
    "executablePath": "/usr/bin/chromium", "headless": True, "chromiumSandbox": False}}}
if token:
    config["browser"]["contextOptions"] = {
        "extraHTTPHeaders": {"Authorization": f"Bearer {token}"}}
fd, path = tempfile.mkstemp(prefix="playwright-mcp-", suffix=".json")
with os.fdopen(fd, "w") as out:
    json.dump(config, out)
cli = "/opt/browser/node_modules/@playwright/mcp/cli.js"
os.execvp("node", ["node", cli, "--config", path, "--isolated", "--host", host, "--port", port,
                   "--allowed-hosts", "*", "--caps", "vision"])
