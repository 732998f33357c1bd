"""``artifact environment`` and ``artifact environment-universe``, and the refusals of the
``env ... load-environment-*`` commands that need no Docker (the loads themselves:
tests/e2e/mcp_env/test_environment_data.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cli_runner import cli

NOTES = (Path(__file__).resolve().parents[3]
         / "plugins/mcp_env/agentenv_mcp_env/bundles/multi-mcp/envs/notes")


def put_two(capsys: Any, tmp_path: Path) -> None:
    (tmp_path / "notes.json").write_text('["a"]')
    (tmp_path / "digest.json").write_text('{"heading": "H"}')
    (tmp_path / "readme.txt").write_text("about it")
    for name in ("notes", "digest"):
        assert cli(capsys, "artifact", "environment", "put", str(tmp_path / f"{name}.json"),
                   "--id", f"{name}-data", "--description", name,
                   "--environment-name", name)[0] == 0


def test_a_universe_is_stored_and_written_back_a_folder_per_environment(
        state_root: Path, tmp_path: Path, capsys: Any) -> None:
    put_two(capsys, tmp_path)
    code, out, err = cli(capsys, "artifact", "environment-universe", "put", "--id", "world",
                         "--environment-artifact", "notes-data",
                         "--environment-artifact", "digest-data:1",
                         "--metadata", f"readme={tmp_path / 'readme.txt'}")
    assert (code, out, err) == (0, "artifact world: v1 (new)\n", "")
    target = tmp_path / "out"
    assert cli(capsys, "artifact", "environment-universe", "get", "--id", "world",
               "--output-dir", str(target))[0] == 0
    written = sorted(str(p.relative_to(target)) for p in target.rglob("*") if p.is_file())
    assert written == ["digest/digest.json", "metadata/readme/readme.txt", "notes/notes.json"]
    assert (target / "notes/notes.json").read_text() == '["a"]'
    # the same environments again: the same version
    assert cli(capsys, "artifact", "environment-universe", "put", "--id", "world",
               "--environment-artifact", "notes-data", "--environment-artifact", "digest-data",
               "--metadata", f"readme={tmp_path / 'readme.txt'}")[1] == (
        "artifact world: v1, unchanged\n")


def test_compatible_envs_name_what_each_env_lacks(state_root: Path, tmp_path: Path,
                                                  capsys: Any) -> None:
    put_two(capsys, tmp_path)
    cli(capsys, "artifact", "environment-universe", "put", "--id", "world",
        "--environment-artifact", "notes-data", "--environment-artifact", "digest-data")
    for env_id in ("notes", "digest"):
        assert cli(capsys, "env", "mcp-server", "put", "--id", env_id, "--context", str(NOTES),
                   "--environment-name", env_id)[0] == 0
    assert cli(capsys, "env", "multi", "put", "--id", "office", "--mcp-server", "notes",
               "--mcp-server", "digest")[0] == 0
    code, out, _ = cli(capsys, "artifact", "environment-universe", "compatible-envs",
                       "--id", "world")
    assert code == 0
    assert "env=office v1: COMPATIBLE" in out
    assert "env=notes v1: PARTIAL (no digest)" in out


def test_bad_universe_input_is_one_line(state_root: Path, tmp_path: Path,
                                        capsys: Any) -> None:
    put_two(capsys, tmp_path)
    (tmp_path / "f.txt").write_text("x")
    cli(capsys, "artifact", "file", "put", "--id", "plain", str(tmp_path / "f.txt"))
    cases = [
        (["--environment-artifact", "notes-data", "--environment-artifact", "notes-data"],
         "environment 'notes' is already given by notes-data"),
        (["--environment-artifact", "nope"], "no artifact 'nope' is stored"),
        (["--environment-artifact", "plain"], "a file artifact, not an environment artifact"),
        (["--environment-artifact", "notes-data:x"], "ID or ID:VERSION"),
        (["--environment-artifact", "notes-data", "--metadata", "k"], "KEY=PATH"),
        (["--environment-artifact", "notes-data", "--metadata", "k=/no/such"],
         "no such file /no/such"),
    ]
    for args, said in cases:
        code, _, err = cli(capsys, "artifact", "environment-universe", "put", "--id", "w",
                             *args)
        assert code != 0 and said in err and err.count("\n") == 1, (args, err)
    assert cli(capsys, "artifact", "environment-universe", "get", "--id", "notes-data",
               "--output-dir", str(tmp_path / "o"))[2].startswith(
        "Error: artifact 'notes-data' is a environment artifact, not a environment_universe")


def test_loading_into_a_deployment_refuses_before_reaching_it(state_root: Path, tmp_path: Path,
                                                              capsys: Any) -> None:
    put_two(capsys, tmp_path)
    code, _, err = cli(capsys, "env", "multi", "load-environment-artifact", "--env-instance-id",
                       "nothing-here", "--environment-artifact-id", "notes-data")
    assert code != 0 and "no deployed env 'nothing-here' (agent-env env list" in err
    code, _, err = cli(capsys, "env", "multi", "load-environment-universe-artifact",
                       "--env-instance-id", "x", "--environment-universe-artifact-id",
                       "notes-data")
    assert code != 0 and "is of type 'environment', not 'environment_universe'" in err
    code, _, err = cli(capsys, "env", "multi", "load-environment-universe-artifact",
                       "--env-instance-id", "x", "--environment-universe-artifact-id", "w",
                       "--snapshot-after-load")
    assert code != 0 and "env snapshot --instance-id x saves the seeded env" in err


def test_file_artifact_universes_as_the_reference_spells_them(state_root: Path, tmp_path: Path,
                                                              capsys: Any) -> None:
    (tmp_path / "a.txt").write_text("A")
    (tmp_path / "b.txt").write_text("B")
    bundled = tmp_path / "tree"
    (bundled / "sub").mkdir(parents=True)
    (bundled / "sub" / "c.txt").write_text("C")
    for name in ("a", "b"):
        cli(capsys, "artifact", "file", "put", "--id", name, str(tmp_path / f"{name}.txt"))
    assert cli(capsys, "artifact", "file-artifact-universe", "put", "--id", "ab",
               "--file-artifact", "a", "--file-artifact", "b:1")[1] == "artifact ab: v1 (new)\n"
    assert cli(capsys, "artifact", "file-artifact-universe", "put-bundled", "--id", "tree",
               "--file-dir", str(bundled))[1] == "artifact tree: v1 (new)\n"
    listed = cli(capsys, "artifact", "file-artifact-universe", "list", "--limit", "1")[1]
    assert listed == "  tree v1  files=1\n"  # most recent first
    out = tmp_path / "many"
    code, printed, _ = cli(capsys, "artifact", "file-artifact-universe", "get-many", "--id",
                           "ab", "--id", "tree", "--output-dir", str(out), "--concurrency", "2")
    assert code == 0 and printed.endswith(f"Wrote 3 files of 2 universes to {out}\n")
    assert (out / "ab" / "b.txt").read_text() == "B"
    assert (out / "tree" / "sub" / "c.txt").read_text() == "C"
    one = tmp_path / "one"
    assert cli(capsys, "artifact", "file-artifact-universe", "get", "--id", "tree",
               "--output-dir", str(one))[0] == 0
    assert (one / "sub" / "c.txt").read_text() == "C"
    for args, said in [
        (["put", "--id", "x", "--file-artifact", "a", "--file-artifact", "a"],
         "'a.txt' is also a file of a"),
        (["put-bundled", "--id", "x", "--file-dir", str(bundled), "--prefix-url", "s3://b/p"],
         "--prefix-url is not supported here"),
        (["list", "--batch-id", "b1"], "--batch-id is not supported here"),
        (["get-many", "--output-dir", str(out)], "give --id ID"),
        (["get-many", "--id", "a", "--output-dir", str(out)],
         "--id a: a file artifact, not a file artifact universe"),
    ]:
        code, _, err = cli(capsys, "artifact", "file-artifact-universe", *args)
        assert code != 0 and said in err and err.count("\n") == 1, (args, err)


def test_cli_artifacts_put_and_get(state_root: Path, tmp_path: Path, capsys: Any) -> None:
    tool = tmp_path / "tool"
    (tool / "bin").mkdir(parents=True)
    (tool / "bin" / "slack").write_text("#!/bin/sh\necho hi\n")
    code, out, err = cli(capsys, "artifact", "cli", "put", "--id", "slack-cli", "--cli-dir",
                         str(tool), "--entrypoint", "bin/slack", "--command-name", "slack",
                         "--env-id", "slack", "--env-version", "2")
    assert (code, out, err) == (0, "artifact slack-cli: v1 (new)\n", "")
    from agent_env.bundles.entities import stored_artifacts
    from agent_env.tasks.artifacts import CliSpec

    assert stored_artifacts().load_now("slack-cli").cli == CliSpec("slack", "bin/slack",
                                                                   "slack", 2)
    target = tmp_path / "back"
    assert cli(capsys, "artifact", "cli", "get", "--id", "slack-cli", "--output-dir",
               str(target))[0] == 0
    assert (target / "bin" / "slack").read_text() == "#!/bin/sh\necho hi\n"
    code, _, err = cli(capsys, "artifact", "cli", "put", "--id", "x", "--cli-dir", str(tool),
                       "--entrypoint", "bin/nope", "--command-name", "slack")
    assert code == 1 and "entrypoint 'bin/nope' is not one of its files" in err
