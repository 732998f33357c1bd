"""The ledger: unchanged entities reuse their version; changes write the next with a reason."""

import shutil
from pathlib import Path

import pytest

import agent_env.bundles.shipped as shipped
from agent_env.bundles.entities import StoredArtifacts
from agent_env.bundles.ledger import Ledger
from agent_env.bundles.parse import parse_bundle
from agent_env.bundles.plan import PreflightFailed, plan_bundle
from agent_env.stores.filesystem import FilesystemObjectStore
from agent_env.stores.sqlite import SqliteDocumentStore
from agent_env.stores.versioned import VersionedStore

HELLO = Path(shipped.__file__).parent / "hello"


@pytest.fixture
def stores(tmp_path):
    documents = SqliteDocumentStore(tmp_path / "docs.sqlite3")
    yield VersionedStore(documents), FilesystemObjectStore(tmp_path / "objects", fsync=False)
    documents.close()


def write(folder, stores, dry_run=False):
    bundle, problems = parse_bundle(folder, "@local/b")
    plan = plan_bundle(bundle, parse_problems=problems)
    return Ledger(*stores, dry_run=dry_run).write_plan(plan)


def test_new_unchanged_then_changed(tmp_path, stores):
    folder = tmp_path / "b"
    shutil.copytree(HELLO, folder)
    assert [str(x) for x in write(folder, stores, dry_run=True).lines] == [
        "artifacts/greeting: would write v1 (new)", "tasks/hello.json: would write v1 (new)"]
    assert [str(x) for x in write(folder, stores).lines] == [
        "artifacts/greeting: v1 (new)", "tasks/hello.json: v1 (new)"]
    assert [str(x) for x in write(folder, stores).lines] == [
        "artifacts/greeting: v1, unchanged", "tasks/hello.json: v1, unchanged"]
    (folder / "artifacts/greeting/hello.txt").write_text("bye\n")
    (folder / "artifacts/greeting/extra.txt").write_text("x\n")
    result = write(folder, stores)
    assert str(result.lines[0]) == ("artifacts/greeting: v2 (files changed: hello.txt; "
                                    "files added: extra.txt)")
    assert result.version("artifacts", "@local/b/greeting") == 2


async def test_stored_artifacts_read_back_the_pinned_version(tmp_path, stores):
    folder = tmp_path / "b"
    shutil.copytree(HELLO, folder)
    write(folder, stores)
    (folder / "artifacts/greeting/hello.txt").write_text("bye\n")
    write(folder, stores)
    pinned = StoredArtifacts(*stores, pins={"@local/b/greeting": 1})
    assert (await pinned.load("@local/b/greeting")).file("hello.txt").data == b"hello\n"
    latest = StoredArtifacts(*stores)
    assert (await latest.load("@local/b/greeting")).file("hello.txt").data == b"bye\n"
    with pytest.raises(LookupError):
        await latest.load("@local/b/nope")


def test_selection_problems(tmp_path, stores):
    bundle, _ = parse_bundle(HELLO, "@local/b")
    with pytest.raises(PreflightFailed) as caught:
        plan_bundle(bundle, task_names=["nope"])
    assert caught.value.problems == [
        "--task nope: no such task in this bundle (tasks: tasks/hello.json)"]
