"""A Harbor task whose tests install what they need (apt-get, from Debian's mirror) passes its
oracle with our defaults, since Harbor's allow_internet defaults to true and becomes the env's
network policy ``open``; the same task with ``allow_internet = false`` scores 0 quickly, and the
run summary quotes the tests' own words. Needs Debian's package mirror, as the image builds do."""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

pytestmark = pytest.mark.docker
TASKS = Path(__file__).parents[2] / "unit" / "harbor" / "tasks"
TEST_SH = """#!/bin/bash
# installs its tool when it runs, as many public Harbor tasks do
start=$(date +%s)
apt-get update -qq >/dev/null 2>&1
if apt-get install -y -qq --no-install-recommends jq >/dev/null 2>&1; then
  jq -e '.greeting == "Hello, world!"' <<< "{\\"greeting\\": \\"$(cat /app/hello.txt)\\"}" \\
    && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt
else
  echo "could not install jq after $(( $(date +%s) - start ))s"
  echo 0 > /logs/verifier/reward.txt
fi
"""


def _task(root: Path, name: str, allow_internet: bool | None) -> None:
    folder = root / name
    shutil.copytree(TASKS / "hello-file", folder)
    (folder / "tests" / "test.sh").write_text(TEST_SH)
    settings = (folder / "task.toml").read_text()
    if allow_internet is not None:
        settings = settings.replace("[environment]\n", "[environment]\nallow_internet = "
                                    f"{str(allow_internet).lower()}\n")
    (folder / "task.toml").write_text(settings)


def test_tests_that_download_pass_with_harbors_default_and_fail_fast_without(
        agent_env, tmp_path: Path, left_by: Callable[[str], list[str]]) -> None:
    source = tmp_path / "harbor"
    _task(source, "online", None)  # Harbor's default: allow_internet = true
    _task(source, "offline", False)
    done = agent_env("bundle", "import", "harbor", str(source), "-o", str(tmp_path / "bundle"))
    assert done.returncode == 0, done.stderr
    assert "  network: open (a route out, as [environment] allow_internet asks)" in done.stdout
    assert "  network: none (no route out: [environment] allow_internet is false)" \
        in done.stdout
    run = agent_env("run", str(tmp_path / "bundle"), "--agent", "oracle", timeout=1200)
    out = run.stdout
    assert "tasks/online.json v1: passed (tests: 1)" in out, out + run.stderr
    assert "tasks/offline.json v1: scored below 1 (tests: 0)" in out, out
    quoted = re.search(r"reward: reward = 0 \(tests/test\.sh exited 0; its last lines: "
                       r"could not install jq after (\d+)s\)", out)
    assert quoted, out
    assert int(quoted.group(1)) < 30  # lookups fail at once, not after 10-20 s each
    assert left_by(out) == []


def test_an_image_map_runs_a_task_whose_base_image_cannot_be_pulled(
        agent_env, tmp_path: Path, left_by: Callable[[str], list[str]]) -> None:
    """The task names a registry this machine cannot reach; mapped at import onto an image the
    engine has, it builds and its oracle passes. Unmapped, the build fails naming the image."""
    source = tmp_path / "harbor" / "mirrored"
    shutil.copytree(TASKS / "hello-file", source)
    dockerfile = source / "environment" / "Dockerfile"
    dockerfile.write_text(dockerfile.read_text().replace(
        "FROM python:3.11-slim", "FROM registry.invalid/library/python:3.11-slim"))
    done = agent_env("bundle", "import", "harbor", str(source), "-o", str(tmp_path / "plain"))
    assert done.returncode == 0, done.stderr
    failed = agent_env("run", str(tmp_path / "plain"), "--agent", "oracle", timeout=600)
    assert failed.returncode != 0
    assert ("(FROM registry.invalid/library/python:3.11-slim cannot be pulled here: pull or "
            "mirror it, and map it at import with bundle import --image-map FROM=TO)") \
        in failed.stdout + failed.stderr
    done = agent_env("bundle", "import", "harbor", str(source), "-o", str(tmp_path / "mapped"),
                     "--image-map", "registry.invalid/library/python:3.11-slim=python:3.11-slim")
    assert done.returncode == 0, done.stderr
    assert "image map: environment/Dockerfile: FROM registry.invalid/library/python:3.11-slim" \
        " -> python:3.11-slim" in done.stdout
    run = agent_env("run", str(tmp_path / "mapped"), "--agent", "oracle", timeout=600)
    assert "tasks/mirrored.json v1: passed (tests: 1)" in run.stdout, run.stdout + run.stderr
    assert left_by(run.stdout) == []
