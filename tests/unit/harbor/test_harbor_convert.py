"""``agent-env bundle import/export harbor`` without an engine: what an import writes, that export
gives the original folders back, which tasks export refuses and why, and one-line errors that
write nothing. (Running an imported task on Docker: tests/e2e/harbor.)"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from cli_runner import cli

TASKS = Path(__file__).parent / "tasks"
# conversions claim their scratch folder in the state root (for gc): keep it private
pytestmark = pytest.mark.usefixtures("state_root")


def files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes()
            for p in sorted(root.rglob("*")) if p.is_file()}


def test_import_then_export_gives_the_original_task_folders_back(capsys, tmp_path) -> None:
    code, out, err = cli(capsys, "bundle", "import", "harbor", str(TASKS), "-o",
                         str(tmp_path / "bundle"))
    assert code == 0
    # a dataset shows a line per task as it goes (on stderr: stdout is the report)
    assert err.splitlines() == [f"[{i}/4] {TASKS / name}" for i, name in enumerate(
        ("answer-separate", "hello-file", "orders-compose", "partial-credit"), 1)]
    assert f"imported {TASKS / 'hello-file'} -> tasks/hello-file.json" in out
    # the [task] name of a 1.1 task.toml names it (its last part), else the folder does
    assert "-> tasks/partial-credit.json" in out
    assert ("note: [environment] cpus, memory_mb kept in task.toml, not applied" in out)
    assert out.rstrip().endswith(f"Run it with: agent-env run {tmp_path / 'bundle'}")

    code, out, _ = cli(capsys, "bundle", "export", "harbor", str(tmp_path / "bundle"), "-o",
                       str(tmp_path / "back"))
    assert code == 0
    assert "exported tasks/hello-file.json -> hello-file/" in out
    for task in ("answer-separate", "hello-file", "orders-compose", "partial-credit"):
        assert files(tmp_path / "back" / task) == files(TASKS / task)


def test_what_the_import_writes(capsys, tmp_path) -> None:
    cli(capsys, "bundle", "import", "harbor", str(TASKS / "hello-file"), "-o",
        str(tmp_path / "b"))
    bundle = tmp_path / "b"
    steps = json.loads((bundle / "tasks" / "hello-file.json").read_text())
    assert [(s["id"], s["type"]) for s in steps] == [
        ("deploy", "deploy_env"), ("agent", "deploy_agent"), ("solve", "prompt_agent"),
        ("tests", "env_outcome_verifier")]
    assert steps[2]["prompt"] == (TASKS / "hello-file" / "instruction.md").read_text()
    assert steps[2]["timeout_seconds"] == 120.0  # [agent] timeout_sec
    assert "a2a_agent_id" not in steps[1]  # the run's --agent plays it
    # the env is the task's container plus the shell server; the tests are not in it
    env = files(bundle / "envs" / "hello-file")
    assert sorted(env) == ["Dockerfile", "agentenv_harbor_shell.py", "env.toml"]
    assert env["Dockerfile"].startswith((TASKS / "hello-file/environment/Dockerfile")
                                        .read_bytes())
    assert b'CMD ["python3", "/opt/agentenv-harbor/agentenv_harbor_shell.py"]' in env[
        "Dockerfile"]
    assert sorted(files(bundle / "artifacts" / "hello-file-harbor")) == [
        "instruction.md", "solution/solve.sh", "task.toml", "tests/test.sh", "verify.py"]
    # the bundle is valid as our engine reads it
    from agent_env.bundles.parse import parse_bundle

    parsed, problems = parse_bundle(bundle, "@t/b")
    assert problems == []
    assert [e.environment_name for e in parsed.envs] == ["harbor"]


def harbor_task(root: Path, name: str = "t") -> Path:
    folder = root / name
    shutil.copytree(TASKS / "hello-file", folder)
    return folder


def compose(folder: Path, services: str, main: str = "    build: .\n") -> None:
    """A compose file with ``main`` and ``services`` (YAML under ``services:``)."""
    (folder / "environment" / "docker-compose.yaml").write_text(
        f"services:\n  main:\n{main}{services}")


@pytest.mark.parametrize(("change", "error"), [
    (lambda f: (f / "task.toml").unlink(), "no Harbor task here"),
    (lambda f: (f / "task.toml").write_text("[verifier\n"), "task.toml: not valid TOML"),
    (lambda f: (f / "task.toml").write_text("[agent]\ntimeout_sec = -1\n"),
     "task.toml: [agent] timeout_sec must be a number of seconds from 0 to 86400, not -1"),
    # issue 31, class 15: values that used to be tracebacks, or write a bundle we cannot run
    (lambda f: (f / "task.toml").write_text("task = 5\n"), "task must be a table ([task])"),
    (lambda f: (f / "task.toml").write_text('agent = "fast"\n'), "agent must be a table"),
    (lambda f: (f / "task.toml").write_text("[task]\nname = 7\n"),
     "[task] name must be a string, not 7"),
    (lambda f: (f / "task.toml").write_text("[agent]\ntimeout_sec = 1e400\n"),
     "[agent] timeout_sec must be a number of seconds from 0 to 86400, not inf"),
    (lambda f: (f / "task.toml").write_text("[verifier]\ntimeout_sec = nan\n"),
     "timeout_sec must be a number of seconds from 0 to 86400, not nan"),
    (lambda f: (f / "task.toml").write_text("x = " + "[" * 100_000 + "]" * 100_000 + "\n"),
     "task.toml: not valid TOML"),
    (lambda f: (f / "instruction.md").write_text("\x01" * (3 * 2**20)),
     "instruction.md: too long for a task file"),
    (lambda f: (f / "instruction.md").unlink(), "has no instruction.md"),
    (lambda f: (f / "instruction.md").write_bytes(b"\xff\xfe"), "instruction.md: not UTF-8 text"),
    (lambda f: (f / "tests" / "test.sh").unlink(), "has no tests/test.sh"),
    (lambda f: (f / "environment" / "docker-compose.yaml").write_text("services: {}\n"),
     "a Harbor compose file has services, one of them 'main'"),
    (lambda f: compose(f, "  db:\n    image: x\n    network_mode: host\n"),
     "service 'db': network_mode is not supported (an env's services share its one private"),
    (lambda f: compose(f, "  db:\n    image: x\n    privileged: true\n    devices: [a]\n"),
     "service 'db': privileged is not supported (an env is a sandbox); "),
    (lambda f: compose(f, "  db:\n    build: ../..\n"),
     "service 'db': build context '../..' is not a folder inside environment/"),
    (lambda f: compose(f, "  db:\n    image: x\n    volumes: ['./data:/data']\n"),
     "volume './data:/data' mounts a host path, which an env cannot do"),
    (lambda f: compose(f, "  db:\n    image: x\n    volumes: ['data:/data']\n"),
     "volume 'data' is not declared under the top-level volumes"),
    (lambda f: compose(f, "  db:\n    image: x\n    environment: [TOKEN]\n"),
     "environment entry 'TOKEN' has no value"),
    (lambda f: compose(f, "  db:\n    image: x\n    healthcheck: {test: ok, every: 1s}\n"),
     "healthcheck: unknown key(s) every"),
    (lambda f: compose(f, "  gateway:\n    image: x\n"),
     "service 'gateway': the name cannot be a service's host name here"),
    (lambda f: compose(f, "  db: {image: x}\n", main="    image: ubuntu\n"),
     "service 'main': must build from environment/Dockerfile (build: .)"),
    (lambda f: (f / "environment" / "docker-compose.yaml").write_text("services: [\n"),
     "docker-compose.yaml: not valid YAML"),
    (lambda f: compose(f, "  db:\n    image: x\n    1: one\n    two: 2\n"),
     "service 'db': key '1' is not supported; "),
    # schema 1.3: what cannot be honoured is refused by name, never dropped
    (lambda f: (f / "task.toml").write_text('[verifier]\nenvironment_mode = "apart"\n'),
     '[verifier] environment_mode must be "shared" or "separate", not \'apart\''),
    (lambda f: (f / "task.toml").write_text(
        '[verifier]\nenvironment_mode = "shared"\n[verifier.environment]\ncpus = 2\n'),
     '[verifier.environment] needs environment_mode "separate"'),
    (lambda f: (f / "task.toml").write_text('[verifier]\nenvironment_mode = "separate"\n'),
     "a separate verifier is built from tests/Dockerfile, and this task has none"),
    (lambda f: ((f / "tests" / "Dockerfile").write_text("FROM x\n"), (f / "task.toml")
                .write_text('[verifier.environment]\ndocker_image = "org/verifier:1"\n')),
     "docker_image: a prebuilt verifier image is not supported"),
    (lambda f: (f / "task.toml").write_text('[[steps]]\nname = "one"\n'),
     "[[steps]]: multi-step tasks are not supported"),
    (lambda f: (f / "task.toml").write_text(
        'artifacts = [{source = "/var/log/api.log", service = "api"}]\n'),
     "artifacts entry /var/log/api.log: collecting from service 'api' is not supported"),
    (lambda f: (f / "task.toml").write_text('artifacts = ["relative.txt"]\n'),
     "artifacts entry 'relative.txt' names no absolute path"),
    (lambda f: (f / "environment" / "Dockerfile").unlink(), "has no environment/Dockerfile"),
    (lambda f: (f / "tests" / "link").symlink_to("/etc/passwd"), "link is a symlink: only regular"),
    (lambda f: os.mkfifo(f / "tests" / "pipe"), "pipe is a FIFO: only regular"),
    (lambda f: (f / "instruction.md").unlink() or (f / "instruction.md").symlink_to("/dev/zero"),
     "instruction.md is a symlink"),
    (lambda f: (f / "instruction.md").unlink() or os.mkfifo(f / "instruction.md"),
     "instruction.md is a FIFO"),
])
def test_bad_task_folders_are_one_line_and_write_nothing(capsys, tmp_path, change,
                                                         error) -> None:
    folder = harbor_task(tmp_path / "src")
    change(folder)
    code, out, err = cli(capsys, "bundle", "import", "harbor", str(folder), "-o",
                         str(tmp_path / "out"))
    assert code == 1 and out == ""
    assert err.startswith("Error: ") and error in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["src", "state"]  # no scratch left


def test_two_tasks_of_one_name_are_refused(capsys, tmp_path) -> None:
    harbor_task(tmp_path / "src", "a")
    second = harbor_task(tmp_path / "src", "b")
    (second / "task.toml").write_text('[task]\nname = "org/a"\n')
    code, out, _ = cli(capsys, "bundle", "import", "harbor", str(tmp_path / "src"), "-o",
                       str(tmp_path / "out"))
    assert code == 0  # the first is imported, the second refused on its line
    assert f"refused {second}: would write task 'a' (as {tmp_path / 'src' / 'a'})" in out
    assert "imported 1, refused 1" in out


def test_a_dataset_imports_every_task_it_can_and_refuses_the_rest(capsys, tmp_path) -> None:
    """One task the import cannot honour never costs the others; --strict makes it exit 1."""
    harbor_task(tmp_path / "src", "good")
    bad = harbor_task(tmp_path / "src", "bad")
    compose(bad, "  db:\n    image: x\n    privileged: true\n")
    broken = harbor_task(tmp_path / "src", "broken")
    (broken / "tests" / "test.sh").unlink()
    code, out, _ = cli(capsys, "bundle", "import", "harbor", str(tmp_path / "src"), "-o",
                       str(tmp_path / "out"))
    assert code == 0, out
    lines = out.splitlines()
    assert [line for line in lines if line.startswith("refused ")] == [
        f"refused {bad}/environment/docker-compose.yaml: service 'db': privileged is not "
        "supported (an env is a sandbox)",
        f"refused {broken}: has no tests/test.sh"]
    assert "imported 1, refused 2" in lines
    assert sorted(p.name for p in (tmp_path / "out" / "tasks").iterdir()) == ["good.json"]
    assert sorted(p.name for p in (tmp_path / "out" / "envs").iterdir()) == ["good"]

    code, out, _ = cli(capsys, "bundle", "import", "harbor", str(tmp_path / "src"), "-o",
                       str(tmp_path / "strict"), "--strict")
    assert code == 1 and "imported 1, refused 2" in out
    assert (tmp_path / "strict" / "tasks" / "good.json").is_file()  # written all the same


def test_a_task_that_fails_half_way_leaves_none_of_its_files(capsys, tmp_path,
                                                             monkeypatch) -> None:
    import agentenv_harbor.convert as convert

    harbor_task(tmp_path / "src", "good")
    harbor_task(tmp_path / "src", "late")
    real = convert.shutil.copyfile

    def failing(source, target, *args, **kwargs):
        if "late" in str(target) and str(source).endswith("verify.py"):
            raise convert.UserError("late: the disk is full")
        return real(source, target, *args, **kwargs)

    monkeypatch.setattr(convert.shutil, "copyfile", failing)
    code, out, _ = cli(capsys, "bundle", "import", "harbor", str(tmp_path / "src"), "-o",
                       str(tmp_path / "out"))
    assert code == 0 and "refused late: the disk is full" in out
    written = sorted(p.relative_to(tmp_path / "out").as_posix()
                     for p in (tmp_path / "out").rglob("*") if p.is_file())
    assert not any("late" in path for path in written), written


def test_an_existing_output_folder_is_never_overwritten(capsys, tmp_path) -> None:
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "keep.txt").write_text("mine")
    code, _, err = cli(capsys, "bundle", "import", "harbor", str(TASKS), "-o",
                       str(tmp_path / "out"))
    assert code == 1 and "exists and is not empty: give a new folder" in err
    assert files(tmp_path / "out") == {"keep.txt": b"mine"}


def test_export_names_the_tasks_that_do_not_fit(capsys, tmp_path) -> None:
    cli(capsys, "bundle", "import", "harbor", str(TASKS), "-o", str(tmp_path / "b"))
    (tmp_path / "b" / "tasks" / "other.json").write_text(json.dumps(
        [{"id": "x", "type": "run_code", "code": "print(1)"}]))
    code, out, _ = cli(capsys, "bundle", "export", "harbor", str(tmp_path / "b"), "-o",
                       str(tmp_path / "back"))
    assert code == 0
    assert ("skipped tasks/other.json: a Harbor task is one env, one prompt and one test run"
            in out)
    assert sorted(p.name for p in (tmp_path / "back").iterdir()) == [
        "answer-separate", "hello-file", "orders-compose", "partial-credit"]

    hello = tmp_path / "hello-bundle"
    shutil.copytree(Path(__file__).parents[3] / "core/agent_env/bundles/shipped/hello", hello)
    code, _, err = cli(capsys, "bundle", "export", "harbor", str(hello), "-o",
                       str(tmp_path / "none"))
    assert code == 1 and "no task fits the Harbor format" in err
    assert not (tmp_path / "none").exists()


def test_an_unknown_format_names_the_installed_ones(capsys, tmp_path) -> None:
    code, _, err = cli(capsys, "bundle", "import", "swe-bench", str(TASKS), "-o",
                       str(tmp_path / "o"))
    assert code == 1
    assert err.strip() == "Error: no bundle format named 'swe-bench' (installed: harbor)"


def test_an_output_folder_that_cannot_be_written_is_one_line(capsys, tmp_path) -> None:
    code, out, err = cli(capsys, "bundle", "import", "harbor", str(TASKS), "-o",
                         "/proc/agent-env-cannot-write-here")
    assert code == 1 and out == ""
    assert err.strip() == ("Error: cannot write /proc/agent-env-cannot-write-here (No such file "
                           "or directory): give a folder you can write")


def _imported(capsys, tmp_path) -> Path:
    bundle = tmp_path / "bundle"
    assert cli(capsys, "bundle", "import", "harbor", str(TASKS / "hello-file"), "-o",
               str(bundle))[0] == 0
    return bundle


@pytest.mark.parametrize(("change", "error"), [
    (lambda b: (b / "envs" / "hello-file" / "shadow").symlink_to("/etc/shadow"),
     "shadow is a symlink: only regular files"),
    (lambda b: (b / "artifacts" / "hello-file-harbor" / "tests" / "big").symlink_to("/usr"),
     "big is a symlink"),
    (lambda b: os.mkfifo(b / "envs" / "hello-file" / "pipe"), "pipe is a FIFO"),
])
def test_export_copies_only_regular_files_inside_the_bundle(capsys, tmp_path, change,
                                                            error) -> None:
    """Issue 31, class 3: a link out of the bundle (a secret, or gigabytes) is refused, not
    followed; nothing is written and no scratch folder stays."""
    bundle = _imported(capsys, tmp_path)
    change(bundle)
    code, _, err = cli(capsys, "bundle", "export", "harbor", str(bundle), "-o",
                         str(tmp_path / "out"))
    assert code == 1 and error in err and len(err.strip().splitlines()) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bundle", "state"]
    assert list((tmp_path / "state" / "scratch").glob("*")) == []  # its claim went too


@pytest.mark.parametrize("field, value", [
    ("env_id", "../../outside"), ("env_id", "/etc"), ("file_artifact_id", ".."),
    ("file_artifact_id", "a/../../../x"),
])
def test_export_refuses_step_fields_that_name_paths(capsys, tmp_path, field, value) -> None:
    bundle = _imported(capsys, tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "Dockerfile").write_text("FROM x\n# --- added by agent-env bundle import "
                                        "harbor: the container as an AgentEnv env ---\n")
    task = bundle / "tasks" / "hello-file.json"
    steps = json.loads(task.read_text())
    for step in steps:
        if field in step:
            step[field] = value
    task.write_text(json.dumps(steps))
    code, _, err = cli(capsys, "bundle", "export", "harbor", str(bundle), "-o",
                       str(tmp_path / "out"))
    assert code == 1 and f"{field} {value!r} names no folder" in err
    assert not (tmp_path / "out").exists()


def test_a_conversion_stops_at_its_size_cap(capsys, tmp_path, monkeypatch) -> None:
    from agentenv_harbor import convert

    folder = harbor_task(tmp_path / "src")
    (folder / "environment" / "data.bin").write_bytes(b"x" * 5000)
    monkeypatch.setattr(convert, "MAX_TOTAL_BYTES", 4096)
    code, _, err = cli(capsys, "bundle", "import", "harbor", str(folder), "-o",
                       str(tmp_path / "out"))
    assert code == 1 and "data.bin: the conversion would copy more than" in err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("command", ["import", "export"])
def test_an_output_inside_the_source_is_refused(capsys, tmp_path, command) -> None:
    source = harbor_task(tmp_path / "src") if command == "import" else _imported(capsys,
                                                                                 tmp_path)
    code, _, err = cli(capsys, "bundle", command, "harbor", str(source), "-o",
                       str(source / "sub" / "out"))
    assert code == 1 and "is inside" in err and "give a folder outside it" in err
    assert not (source / "sub").exists()


def test_dot_files_are_kept_and_what_is_left_out_is_said(capsys, tmp_path) -> None:
    """A task's tests/.truth/ reaches the bundle (and so the container); version control and
    caches are left out, and the import says so."""
    from agent_env.bundles.model import local_id_root
    from agent_env.bundles.parse import parse_bundle

    folder = harbor_task(tmp_path / "src", "t")
    (folder / "tests" / ".truth").mkdir()
    (folder / "tests" / ".truth" / "expected.txt").write_text("42\n")
    (folder / "environment" / "__pycache__").mkdir()
    (folder / "environment" / "__pycache__" / "x.pyc").write_bytes(b"\0")
    (folder / ".git").mkdir()
    (folder / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    code, out, _ = cli(capsys, "bundle", "import", "harbor", str(folder), "-o",
                       str(tmp_path / "b"))
    assert code == 0
    assert ("  note: left out environment/__pycache__ (version control, caches and folder "
            "litter are never part of a bundle)") in out
    parsed, problems = parse_bundle(tmp_path / "b", local_id_root(tmp_path / "b"))
    assert problems == []
    (tests,) = [a for a in parsed.artifacts if a.name == "t-harbor"]
    assert "tests/.truth/expected.txt" in [f.path for f in tests.files]


def test_per_task_layout_writes_one_bundle_per_task(capsys, tmp_path) -> None:
    code, out, _ = cli(capsys, "bundle", "import", "harbor", str(TASKS), "-o",
                       str(tmp_path / "out"), "--layout", "per-task")
    assert code == 0, out
    assert f"imported {TASKS / 'hello-file'} -> hello-file/: tasks/hello-file.json" in out
    assert sorted(p.name for p in (tmp_path / "out").iterdir() if not p.name.startswith(".")) \
        == ["answer-separate", "hello-file", "orders-compose", "partial-credit"]
    from agent_env.bundles.model import local_id_root
    from agent_env.bundles.parse import parse_bundle

    for task in ("hello-file", "orders-compose"):
        bundle = tmp_path / "out" / task
        parsed, problems = parse_bundle(bundle, local_id_root(bundle))
        assert problems == []
        assert [t.name for t in parsed.tasks] == [task]


def test_a_rerun_rewrites_only_what_changed(capsys, tmp_path) -> None:
    source = tmp_path / "src"
    harbor_task(source, "a")
    harbor_task(source, "b")
    out = tmp_path / "out"
    assert cli(capsys, "bundle", "import", "harbor", str(source), "-o", str(out))[0] == 0
    before = {p: p.stat().st_mtime_ns for p in out.rglob("*") if p.is_file()}
    code, text, _ = cli(capsys, "bundle", "import", "harbor", str(source), "-o", str(out))
    assert code == 0
    assert "0 files rewritten" in text and ", 0 removed" in text
    assert {p: p.stat().st_mtime_ns for p in out.rglob("*") if p.is_file()
            and p.name != ".agentenv-import.json"} == {
        p: t for p, t in before.items() if p.name != ".agentenv-import.json"}

    (source / "a" / "instruction.md").write_text("Say hello, louder.\n")
    shutil.rmtree(source / "b")
    code, text, _ = cli(capsys, "bundle", "import", "harbor", str(source), "-o", str(out))
    assert code == 0
    assert "2 files rewritten" in text  # the artifact's instruction.md and the task file
    assert not (out / "tasks" / "b.json").exists() and not (out / "envs" / "b").exists()
    assert "louder" in (out / "tasks" / "a.json").read_text()
    # another folder's import into it is refused, as any non-empty output is
    other = tmp_path / "other"
    harbor_task(other, "c")
    code, _, err = cli(capsys, "bundle", "import", "harbor", str(other), "-o", str(out))
    assert code == 1 and "exists and is not empty" in err


def test_an_image_map_rewrites_base_images_and_export_puts_them_back(capsys, tmp_path) -> None:
    """--image-map (over the config's image_map) rewrites FROM lines and sidecar images at
    import, says so, and export gives the original files back."""
    source = tmp_path / "src"
    shutil.copytree(TASKS / "orders-compose", source / "orders-compose")
    config = tmp_path / "state" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    code, out, err = cli(capsys, "bundle", "import", "harbor", str(source), "-o",
                         str(tmp_path / "b"), "--image-map",
                         "python:3.11-slim=mirror.example/library/python:3.11-slim")
    assert code == 0, err
    assert ("  image map: environment/Dockerfile: FROM python:3.11-slim -> "
            "mirror.example/library/python:3.11-slim") in out
    assert ("  image map: service db: FROM python:3.11-slim -> "
            "mirror.example/library/python:3.11-slim") in out
    main = (tmp_path / "b" / "envs" / "orders-compose-main" / "Dockerfile").read_text()
    assert main.startswith("FROM mirror.example/library/python:3.11-slim\n")
    db = (tmp_path / "b" / "envs" / "orders-compose-db" / "Dockerfile").read_text()
    assert db.startswith("FROM mirror.example/library/python:3.11-slim\n")
    code, _, _ = cli(capsys, "bundle", "export", "harbor", str(tmp_path / "b"), "-o",
                     str(tmp_path / "back"))
    assert code == 0
    assert files(tmp_path / "back" / "orders-compose") == files(source / "orders-compose")
    code, _, err = cli(capsys, "bundle", "import", "harbor", str(source), "-o",
                       str(tmp_path / "c"), "--image-map", "python")
    assert code == 1 and "--image-map python: give FROM=TO (two image names)" in err


def test_a_rerun_never_writes_or_removes_outside_its_output(capsys, tmp_path) -> None:
    """The marker is a file in the user's folder: a name in it that leads out is not removed,
    and a link the output holds is replaced, never written through."""
    import json as json_module

    source = tmp_path / "src"
    harbor_task(source, "a")
    out = tmp_path / "out"
    assert cli(capsys, "bundle", "import", "harbor", str(source), "-o", str(out))[0] == 0
    outside = tmp_path / "precious.txt"
    outside.write_text("keep me")
    marker = out / ".agentenv-import.json"
    found = json_module.loads(marker.read_text())
    found["files"] += [str(outside), "../precious.txt"]
    marker.write_text(json_module.dumps(found))
    target = out / "tasks" / "a.json"
    target.unlink()
    target.symlink_to(outside)
    code, text, _ = cli(capsys, "bundle", "import", "harbor", str(source), "-o", str(out))
    assert code == 0, text
    assert outside.read_text() == "keep me"
    assert not target.is_symlink() and json_module.loads(target.read_text())[0]["type"] == \
        "deploy_env"
