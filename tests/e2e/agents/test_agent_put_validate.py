"""``agent-env a2a-agent put/get/list/validate`` from the shell: a user's own agent folder becomes
a versioned entity (unchanged sources are the same version), ``deploy_agent`` finds it by id and
version, and ``validate`` deploys it on the real engine, scores its card, one scripted prompt
and the A2A validators (the system prompt one answered by a script turn that matches only when
the system prompt reached the model), and leaves nothing behind."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from agentenv_agents.plugin import AGENTS

pytestmark = pytest.mark.docker


@pytest.fixture
def own_agent(tmp_path: Path) -> Path:
    """The shipped model-agent's folder, copied as a user's own agent."""
    folder = tmp_path / "my-agent"
    shutil.copytree(AGENTS / "model-agent", folder,
                    ignore=shutil.ignore_patterns("__pycache__"))
    return folder


def test_put_is_versioned_by_content_and_get_and_list_show_it(agent_env, own_agent) -> None:
    first = agent_env("a2a-agent", "put", "--id", "my-agent", "--folder", str(own_agent))
    assert (first.returncode, first.stdout.strip()) == (0, "agent my-agent: v1 (new)")
    again = agent_env("a2a-agent", "put", "--id", "my-agent", "--folder", str(own_agent))
    assert again.stdout.strip() == "agent my-agent: v1, unchanged"
    with (own_agent / "agent.py").open("a") as handle:
        handle.write("# my change\n")
    changed = agent_env("a2a-agent", "put", "--id", "my-agent", "--folder", str(own_agent))
    assert changed.stdout.strip() == "agent my-agent: v2 (files changed: agent.py)"

    shown = json.loads(agent_env("a2a-agent", "get", "--id", "my-agent").stdout)
    assert shown["version"] == 2 and shown["type"] == "a2a"
    assert shown["files"] == ["Dockerfile", "agent.py", "agent.toml", "requirements.txt"]
    assert Path(shown["folder"], "agent.py").read_text().endswith("# my change\n")
    old = json.loads(agent_env("a2a-agent", "get", "--id", "my-agent", "--version", "1").stdout)
    assert old["version"] == 1 and old["content_hash"] != shown["content_hash"]
    assert not Path(old["folder"], "agent.py").read_text().endswith("# my change\n")
    listed = json.loads(agent_env("a2a-agent", "list", "--json").stdout)
    assert {"id": "my-agent", "version": 2, "files": 4} in listed["stored"]
    assert "model-agent" in [row["id"] for row in listed["agents"]]


@pytest.mark.parametrize(("args", "error"), [
    (["--id", "model-agent", "--folder", "."],
     "Error: 'model-agent' is an installed agent's id (a2a-agent list): store yours under "
     "another id"),
    (["--id", "x"], "Error: give --folder DIR (an agent.toml and its Dockerfile) or "
                    "--image-ref IMAGE"),
    (["--id", "x", "--folder", "nowhere"], "Error: --folder nowhere: not a folder"),
    (["--id", "x", "--image-ref", "a b"], "Error: --image-ref 'a b' is not an image reference "
                                          "(such as registry.example/agent:1.4)"),
    (["--id", "x", "--image-ref", 'x"'], "Error: --image-ref 'x\"' is not an image reference "
                                        "(such as registry.example/agent:1.4)"),
    (["--id", "x", "--folder", ".", "--image-ref", "a:1"],
     "Error: give --folder or --image-ref, not both (an agent.toml's image = names a prebuilt "
     "image)"),
])
def test_bad_puts_are_one_line_and_store_nothing(agent_env, args, error) -> None:
    done = agent_env("a2a-agent", "put", *args)
    assert (done.returncode, done.stderr.strip(), done.stdout) == (1, error, "")
    assert "x" not in json.loads(agent_env("a2a-agent", "list", "--json").stdout)["stored"]


def test_a_folder_without_its_dockerfile_or_with_a_bad_agent_toml_is_refused(
        agent_env, own_agent) -> None:
    (own_agent / "Dockerfile").unlink()
    done = agent_env("a2a-agent", "put", "--id", "my-agent", "--folder", str(own_agent))
    assert done.returncode == 1
    assert done.stderr.strip() == (f"Error: {own_agent}: has no Dockerfile (an a2a agent "
                                   "without image = in its agent.toml is built from one)")
    (own_agent / "agent.toml").write_text("colour = 1\n")
    done = agent_env("a2a-agent", "put", "--id", "my-agent", "--folder", str(own_agent))
    assert done.stderr.strip().startswith(f"Error: {own_agent / 'agent.toml'}: unknown key(s) "
                                          "colour")


def test_put_writes_the_references_options_into_the_stored_agent_toml(agent_env,
                                                                      own_agent) -> None:
    """``--dockerfile``, ``--env-var``, ``--metadata``, ``--default-model``,
    ``--min-disk-size-gb``: kept in the stored version's agent.toml; the folder is untouched."""
    (own_agent / "Dockerfile.agent").write_text((own_agent / "Dockerfile").read_text())
    before = (own_agent / "agent.toml").read_text()
    done = agent_env("a2a-agent", "put", "--id", "tuned", "--context", str(own_agent),
                     "--dockerfile", "Dockerfile.agent", "--env-var", "MODE=fast",
                     "--env-var", "EMPTY=", "--metadata", "takes_credentials=false",
                     "--default-model", "gpt-x", "--min-disk-size-gb", "20",
                     "--skip-validation", "--platform", _this_platform())
    assert (done.returncode, done.stdout.strip()) == (0, "agent tuned: v1 (new)"), done.stderr
    shown = json.loads(agent_env("a2a-agent", "get", "--id", "tuned").stdout)
    assert shown["dockerfile"] == "Dockerfile.agent"
    assert shown["default_env_vars"] == {"MODE": "fast", "EMPTY": ""}
    assert shown["metadata"] == {"takes_credentials": False, "default_model": "gpt-x",
                                 "min_disk_size_gb": 20.0}
    assert (own_agent / "agent.toml").read_text() == before


@pytest.mark.parametrize(("args", "error"), [
    (["--env-var", "NOEQUALS"], "Invalid value for '--env-var': 'NOEQUALS' is not KEY=VALUE"),
    (["--metadata", "colour=red"], "[metadata] takes only default_model, min_disk_size_gb, "
                                   "takes_credentials"),
    (["--platform", "linux/s390x"], "Invalid value for '--platform': linux/s390x: images "
                                    "build for this machine's platform here"),
    (["--validate", "--skip-validation"], "give --validate or --skip-validation, not both"),
])
def test_bad_put_options_store_nothing(agent_env, own_agent, args, error) -> None:
    done = agent_env("a2a-agent", "put", "--id", "tuned", "--folder", str(own_agent), *args)
    assert done.returncode != 0 and error in done.stderr, done.stderr
    assert json.loads(agent_env("a2a-agent", "list", "--json").stdout)["stored"] == []


def _this_platform() -> str:
    from agentenv_agents.cli import host_platform

    return host_platform()


def test_validate_deploys_scores_and_tears_down(
        agent_env, own_agent, left_by: Callable[[str], list[str]]) -> None:
    assert agent_env("a2a-agent", "put", "--id", "my-agent", "--folder",
                     str(own_agent)).returncode == 0
    done = agent_env("a2a-agent", "validate", "--id", "my-agent", timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    # the card, the reply, and each A2A validator of what the card declares
    assert ("validate agent my-agent: passed (card: 1, reply: 1, core: 1, trajectory: 1, "
            "identity: 1, skills: 1, system_prompt: 1, role: 1, modalities: 1)") in done.stdout
    assert "sealed network" in done.stdout
    assert left_by(done.stdout) == []

    # an image that is not there: the deploy fails, named, and nothing is left
    assert agent_env("a2a-agent", "put", "--id", "ghost", "--image-ref",
                     "agentenv/no-such-agent:1").returncode == 0
    failed = agent_env("a2a-agent", "validate", "--id", "ghost", timeout=300)
    assert failed.returncode != 0
    assert "image agentenv/no-such-agent:1 is not on the local Docker engine" in failed.stdout
    assert left_by(failed.stdout) == []
    missing = agent_env("a2a-agent", "validate", "--id", "my-agent", "--version", "7")
    assert missing.stderr.strip() == ("Error: agent 'my-agent' has no version 7 (the latest is "
                                      "v1)")


def test_a_task_deploys_a_stored_agent_at_its_pinned_version(agent_env, own_agent) -> None:
    """deploy_agent's a2a_agent_version picks the stored version: v1 answers, v2 is broken."""
    assert agent_env("a2a-agent", "put", "--id", "my-agent", "--folder",
                     str(own_agent)).returncode == 0
    (own_agent / "agent.py").write_text("raise SystemExit('v2 is broken')\n")
    assert agent_env("a2a-agent", "put", "--id", "my-agent", "--folder",
                     str(own_agent)).returncode == 0
    v1 = agent_env("a2a-agent", "validate", "--id", "my-agent", "--version", "1", timeout=600)
    assert "validate agent my-agent v1: passed" in v1.stdout, v1.stdout + v1.stderr
    v2 = agent_env("a2a-agent", "validate", "--id", "my-agent", timeout=600)
    assert v2.returncode != 0
    assert "v2 is broken" in v2.stdout


def test_an_agent_image_that_fails_to_build_names_the_failing_line(
        agent_env, own_agent, left_by: Callable[[str], list[str]]) -> None:
    dockerfile = own_agent / "Dockerfile"
    dockerfile.write_text(dockerfile.read_text().replace(
        "COPY agent.py", "RUN echo building the agent && exit 3\nCOPY agent.py", 1))
    assert agent_env("a2a-agent", "put", "--id", "my-agent", "--folder",
                     str(own_agent)).returncode == 0
    done = agent_env("a2a-agent", "validate", "--id", "my-agent", timeout=600)
    assert done.returncode != 0
    assert ("The command '/bin/sh -c echo building the agent && exit 3' returned a non-zero "
            "code: 3") in done.stdout
    assert left_by(done.stdout) == []


def test_a_reference_agent_folder_without_agent_toml_is_stored(agent_env, own_agent) -> None:
    """The reference's agent folders have a Dockerfile and no agent.toml, and its CLI says
    ``--context``: stored as an a2a agent with every default."""
    (own_agent / "agent.toml").unlink()
    done = agent_env("a2a-agent", "put", "--id", "ref-agent", "--context", str(own_agent))
    assert (done.returncode, done.stdout.strip()) == (0, "agent ref-agent: v1 (new)"), done.stderr
    shown = json.loads(agent_env("a2a-agent", "get", "--id", "ref-agent").stdout)
    assert shown["type"] == "a2a" and "agent.toml" not in shown["files"]
