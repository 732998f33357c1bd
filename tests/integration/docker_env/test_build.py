"""Content-hash image builds and hermetic protocol injection, on the real engine."""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from pathlib import Path
from typing import Any

import pytest

from agent_env.images.plan import BUILD_DIGEST_LABEL, SOURCE_DIGEST_LABEL, image_tag, plan_build
from agentenv_docker_env.build import ImageBuildError, build_image

pytestmark = pytest.mark.docker

SIMPLE = "FROM python:3.11-slim\nCOPY app.py /app/app.py\nCMD [\"python\", \"/app/app.py\"]\n"


def _context(root: Path, dockerfile: str = SIMPLE, **files: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "Dockerfile").write_text(dockerfile)
    for name, text in {"app.py": "print('hi')\n", **files}.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def _name() -> str:
    return f"t-{uuid.uuid4().hex[:8]}"


def test_same_sources_same_tag_and_no_rebuild(tmp_path: Path, image_names: list[str]) -> None:
    context = _context(tmp_path / "ctx")
    name = _name()
    first = build_image(context, name=name)
    image_names.append(first.tag)
    second = build_image(context, name=name)
    assert first.tag == second.tag
    assert first.tag.startswith(f"agentenv/{name}:") and len(first.tag.rsplit(":", 1)[1]) == 16
    assert first.reused is False and second.reused is True
    assert second.image_id == first.image_id
    assert second.seconds < 1.0


def test_digest_recorded_as_labels(tmp_path: Path, docker_client: Any, image_names: list[str]):
    built = build_image(_context(tmp_path / "ctx"), name=_name(), labels={"team": "x"})
    image_names.append(built.tag)
    labels = docker_client.images.get(built.tag).labels
    assert labels[SOURCE_DIGEST_LABEL] == built.source_digest
    assert labels[BUILD_DIGEST_LABEL] == built.build_digest
    assert built.tag.endswith(built.build_digest[:16])
    assert labels["team"] == "x"


def test_changing_a_file_changes_the_tag(tmp_path: Path, image_names: list[str]) -> None:
    context = _context(tmp_path / "ctx")
    name = _name()
    before = build_image(context, name=name)
    image_names.append(before.tag)
    (context / "app.py").write_text("print('changed')\n")
    after = build_image(context, name=name)
    image_names.append(after.tag)
    assert after.tag != before.tag and after.reused is False


def test_tag_ignores_dockerignored_files_times_and_group_bits(tmp_path: Path) -> None:
    context = _context(tmp_path / "ctx", **{".dockerignore": "scratch/\n", "scratch/a": "1"})
    tag = image_tag(context, name="x")
    (context / "scratch" / "a").write_text("2")  # ignored: not sent to the engine
    os.utime(context / "app.py", (1, 1))  # times are not part of the digest
    (context / "app.py").chmod(0o664)  # modes normalise to 0644/0755
    assert image_tag(context, name="x") == tag
    (context / "app.py").chmod(0o755)  # the executable bit is part of what is built
    assert image_tag(context, name="x") != tag


def test_a_dockerignored_secret_never_reaches_the_image(
        tmp_path: Path, docker_client: Any, image_names: list[str]) -> None:
    """Issue 31, class 1: an env's files go through the store (collected, then laid out
    again) before they are built; the ``.dockerignore`` must hold over that whole path."""
    import shutil

    from agent_env.bundles.parse import collect_files

    source = _context(tmp_path / "src", "FROM python:3.11-slim\nCOPY . /app/\n", **{
        ".dockerignore": "secret.json\n", "secret.json": "s3cr3t", ".npmrc": "registry=x\n"})
    problems: list[str] = []
    stored = tmp_path / "stored"  # what a deploy materialises from the stored file table
    for item in collect_files(source, "env", problems, build_context=True):
        (stored / item.path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(item.source, stored / item.path)
    assert problems == []
    built = build_image(stored, name=_name())
    image_names.append(built.tag)
    listing = docker_client.containers.run(built.tag, ["ls", "-A", "/app"], remove=True)
    names = listing.decode().split()
    assert "secret.json" not in names
    assert {".dockerignore", ".npmrc", "Dockerfile", "app.py"} <= set(names)


def test_failed_build_carries_the_log_tail(tmp_path: Path) -> None:
    dockerfile = "FROM python:3.11-slim\nRUN echo broken-step-marker && exit 3\n"
    context = _context(tmp_path / "ctx", dockerfile)
    lines: list[str] = []
    with pytest.raises(ImageBuildError) as caught:
        build_image(context, name=_name(), progress=lines.append)
    assert any("broken-step-marker" in line for line in caught.value.log_tail)
    assert any("broken-step-marker" in line for line in caught.value.notes)
    assert "non-zero code: 3" in str(caught.value) or "returned a non-zero" in str(caught.value)
    assert any("broken-step-marker" in line for line in lines)  # streamed as it happened


def test_a_build_that_fails_midway_leaves_no_dangling_image(tmp_path: Path,
                                                            docker_client: Any) -> None:
    """Issue 21, class 19: the steps a failed or interrupted build committed are removed with
    it (they used to stay as untagged images, one per step, each the size of its step)."""
    marker = uuid.uuid4().hex  # no cache: these steps are new
    dockerfile = (f"FROM python:3.11-slim\nRUN echo {marker} > /one\n"
                  f"RUN echo {marker} > /two\nRUN exit 4\n")
    context = _context(tmp_path / "ctx", dockerfile)
    before = {image.id for image in docker_client.images.list(filters={"dangling": True})}
    with pytest.raises(ImageBuildError):
        build_image(context, name=_name())
    after = {image.id for image in docker_client.images.list(filters={"dangling": True})}
    assert after - before == set()
    leftovers = [i for i in docker_client.images.list(all=True)
                 if marker in json.dumps(i.attrs.get("ContainerConfig") or {})
                 or marker in json.dumps(i.history())]
    assert leftovers == []  # nor as intermediate images


PROTOCOL_PROBE = """
import hashlib, json, os, sys, agentenv_protocol
from importlib import metadata
pkg = os.path.dirname(agentenv_protocol.__file__)
files = {}
for folder, _, names in os.walk(pkg):
    for name in names:
        if name.endswith(".py"):
            path = os.path.join(folder, name)
            files[os.path.relpath(path, pkg)] = hashlib.sha256(open(path, "rb").read()).hexdigest()
dist = metadata.distribution("agentenv-framework-protocol")
print(json.dumps({"file": agentenv_protocol.__file__, "version": dist.version,
                  "direct_url": dist.read_text("direct_url.json"), "files": files}))
"""


def _our_protocol_files() -> dict[str, str]:
    import agentenv_protocol

    package = Path(agentenv_protocol.__file__).parent
    return {
        path.relative_to(package).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in package.rglob("*.py")
    }


def test_hermetic_build_installs_our_protocol(
    tmp_path: Path, docker_client: Any, image_names: list[str]
) -> None:
    dockerfile = (
        "FROM python:3.11-slim\n"
        "COPY requirements.txt /app/requirements.txt\n"
        "RUN pip install --no-cache-dir -r /app/requirements.txt\n"
        "RUN python -m venv /venv && /venv/bin/pip install --no-cache-dir "
        "agentenv-framework-protocol\n"
        "COPY probe.py /app/probe.py\n"
    )
    context = _context(
        tmp_path / "ctx", dockerfile,
        **{"requirements.txt": "agentenv-framework-protocol\n", "probe.py": PROTOCOL_PROBE},
    )
    built = build_image(context, name=_name())
    image_names.append(built.tag)
    ours = _our_protocol_files()
    for python in ("python", "/venv/bin/python"):
        out = docker_client.containers.run(
            built.tag, [python, "/app/probe.py"], remove=True, network_disabled=True
        )
        found = json.loads(out)
        # Every module of the image's agentenv_protocol is byte for byte this repository's...
        assert found["files"] == ours, python
        # ...installed from the wheel we put into the build, not from PyPI.
        assert "file:///opt/agentenv/wheels/" in found["direct_url"], python
        assert found["version"] == "0.1.0", python
    # The user's context on disk is untouched.
    assert (context / "Dockerfile").read_text() == dockerfile
    assert not (context / ".agentenv-build").exists()


def test_a_protocol_pin_only_pypi_can_meet_is_honoured(tmp_path: Path) -> None:
    """The reference's bundles pin its PyPI protocol: the plan yields instead of failing."""

    pinned = _context(tmp_path / "pinned", SIMPLE,
                      **{"requirements.txt": "agentenv-framework-protocol==0.1.379\n"})
    plan = plan_build(pinned, name="x")
    assert plan.wheel is None
    assert plan.notes == ("requirements.txt: agentenv-framework-protocol==0.1.379 is not this "
                          "repository's protocol (0.1.0): the image gets that PyPI release "
                          "(the reference's; same wire)",)
    loose = _context(tmp_path / "loose", SIMPLE,
                     **{"requirements.txt": "agentenv-framework-protocol>=0.1,<0.2\n"})
    assert plan_build(loose, name="x").wheel is not None  # ours meets it: hermetic as usual


def test_an_official_base_no_registry_gives_falls_back_to_the_local_image(
    tmp_path: Path, image_names: list[str]
) -> None:
    digest = "sha256:" + "0" * 64  # a base pinned by digest, through ECR Public's mirror
    pinned = f"public.ecr.aws/docker/library/python:3.11-slim@{digest}"
    dockerfile = SIMPLE.replace("FROM python:3.11-slim", f"FROM {pinned}")
    context = _context(tmp_path / "ctx", dockerfile)
    lines: list[str] = []
    built = build_image(context, name=_name(), progress=lines.append)
    image_names.append(built.tag)
    assert any(line.startswith(f"FROM {pinned} cannot be pulled (")
               and line.endswith("using the local python:3.11-slim instead") for line in lines)
    assert "Step 1/" in "\n".join(lines) and "FROM python:3.11-slim" in "\n".join(lines)
    assert (context / "Dockerfile").read_text() == dockerfile  # the user's file is untouched
    # The substitution is part of what names the image (a build on the exact base differs).
    assert built.tag == image_tag(context, name=built.tag.split("/")[1].split(":")[0],
                                  bases={pinned: "python:3.11-slim"})
    assert image_tag(context, name="same") != image_tag(
        context, name="same", bases={pinned: "python:3.11-slim"})


def test_a_stop_during_a_silent_step_returns_at_once_and_the_engine_drops_the_build(
    tmp_path: Path, docker_client: Any,
) -> None:
    """Ctrl-C during ``RUN sleep 40`` used to return only at the step's next output line (31 s
    late); the stop now shuts the build's connection."""
    import threading
    import time

    from agentenv_docker_env.build import BuildStopped

    marker = uuid.uuid4().hex[:8]
    context = _context(tmp_path / "ctx", f"FROM python:3.11-slim\nRUN sleep 40 && echo {marker}\n")
    stop = threading.Event()
    started = threading.Event()
    outcome: dict[str, Any] = {}

    def progress(line: str) -> None:
        if "RUN sleep 40" in line:
            started.set()

    def build() -> None:
        try:
            build_image(context, name=_name(), progress=progress, stop=stop)
        except BaseException as exc:
            outcome["error"] = exc
        outcome["at"] = time.monotonic()

    worker = threading.Thread(target=build)
    worker.start()
    assert started.wait(120), "the build never reached its RUN step"
    time.sleep(0.5)  # inside the silent step
    stopped_at = time.monotonic()
    stop.set()
    worker.join(30)
    assert not worker.is_alive()
    assert isinstance(outcome.get("error"), BuildStopped), outcome
    waited = outcome["at"] - stopped_at
    print(f"stop to return during RUN sleep 40: {waited:.2f}s")
    assert waited < 2, waited

    # The engine, its client gone, removes the step's container.
    deadline = time.monotonic() + 15
    while any(marker in " ".join(c.attrs["Config"]["Cmd"] or [])
              for c in docker_client.containers.list(all=True)):
        assert time.monotonic() < deadline, "the build's container is still there"
        time.sleep(0.2)


KILLED_BUILD = """
import sys
from agentenv_docker_env.build import build_image
build_image(sys.argv[1], name=sys.argv[2])
"""


def test_a_build_killed_with_9_leaves_step_images_gc_removes(tmp_path: Path,
                                                              docker_client: Any) -> None:
    """Issue 21, class 19, kill -9: nothing in the build can clean up, so every step image
    carries the builder label (a LABEL line after FROM) and gc removes the untagged ones."""
    import asyncio
    import subprocess
    import sys
    import time

    from agentenv_docker_env.sandbox import DockerSandboxProvider

    marker = uuid.uuid4().hex
    # the second step outlasts the wait below by far, so a slow engine (a loaded machine)
    # cannot finish and tag the build before it is killed
    context = _context(tmp_path / "ctx", f"FROM python:3.11-slim\nRUN echo {marker} > /one\n"
                                         "RUN sleep 900\n")
    build = subprocess.Popen([sys.executable, "-c", KILLED_BUILD, str(context), _name()])

    def left() -> list[Any]:
        return [i for i in docker_client.images.list(all=True)
                if marker in json.dumps(i.history())]

    deadline = time.monotonic() + 120
    while not left() and time.monotonic() < deadline:  # the first RUN's image is committed
        time.sleep(0.2)
    build.kill()
    build.wait()
    time.sleep(2)  # the engine cancels the build once its client is gone
    leftover = left()
    assert leftover, "the killed build committed no step image (nothing to test)"
    assert all(i.labels.get("agentenv.builder") == "agent-env" and not i.tags for i in leftover)

    provider = DockerSandboxProvider()
    kept = asyncio.run(provider.prune_build_leftovers(older_than=3600, dry_run=False))
    assert left() and not any(marker in line for line in kept)  # too young: kept
    listed = asyncio.run(provider.prune_build_leftovers(older_than=0, dry_run=True))
    assert any(leftover[0].id[7:19] in line for line in listed) and left()  # dry run
    removed = asyncio.run(provider.prune_build_leftovers(older_than=0, dry_run=False))
    assert any(leftover[0].id[7:19] in line for line in removed)
    assert left() == []


def test_a_base_image_that_cannot_be_pulled_is_named_with_the_map_option(tmp_path: Path) -> None:
    context = _context(tmp_path / "c", "FROM nosuch.invalid/agentenv-test:1\nCMD [\"true\"]\n")
    with pytest.raises(ImageBuildError) as caught:
        build_image(context, name=_name())
    assert ("(FROM nosuch.invalid/agentenv-test:1 cannot be pulled here: pull or mirror it, "
            "and map it at import with bundle import --image-map FROM=TO)") in str(caught.value)
