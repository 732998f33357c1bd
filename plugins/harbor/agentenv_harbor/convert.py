"""Harbor task folders to bundles and back (``agent-env bundle import/export harbor``).

A Harbor task is a folder: ``task.toml`` (settings; ``[agent]``/``[verifier]`` ``timeout_sec``),
``instruction.md`` (the prompt), ``environment/`` (a Dockerfile and its build context: the
container the agent works in), ``tests/test.sh`` (run in that container after the agent, writes
``/logs/verifier/reward.txt`` or ``reward.json``) and optionally ``solution/``.

Imported, task ``<name>`` becomes, in the bundle:

* ``envs/<name>/``: ``environment/`` with three lines added to its Dockerfile (after a marker
  line) that install our protocol package and start ``agentenv_harbor_shell.py`` (copied beside
  it): the container itself, served as an env whose tools are ``bash``, ``read_file`` and
  ``write_file`` (the image's working directory is theirs). ``env.toml`` names it ``harbor``;
* ``artifacts/<name>-harbor/``: ``tests/``, ``task.toml``, ``instruction.md`` and
  ``solution/`` as they were (what the agent must not see), and ``verify.py``, which sends
  ``tests/`` to the env after the agent is done and scores the rewards ``test.sh`` wrote;
* ``tasks/<name>.json``: ``deploy_env``, ``deploy_agent`` (the run's ``--agent`` or ``[agents]
  default`` plays it), ``prompt_agent`` with the instruction (``[agent] timeout_sec``) and
  ``env_outcome_verifier`` running ``verify.py``.

Export is the reverse for a bundle's tasks of that shape (the folders an import wrote, edited or
not); other tasks are named with the reason they do not fit. Import then export gives the
original files back.

What does not carry over, said in the import's lines: ``docker-compose.yaml`` environments
(refused), ``[environment]`` resources and ``allow_internet`` (kept in ``task.toml`` for export;
env servers here have no route out, so ``test.sh`` cannot download what it needs), an image
without ``python3``, which cannot run the shell server (the build fails naming the line), and
a ``USER`` the Dockerfile sets: the server, and so the agent's commands, run as root (as
Harbor's verifier does), since the tests write ``/tests`` and ``/logs/verifier``.
"""

from __future__ import annotations

import json
import re
import shutil
import tomllib
from pathlib import Path
from typing import Any

from agent_env.api import UserError

TEMPLATES = Path(__file__).parent / "templates"
SHELL_FILE = "agentenv_harbor_shell.py"
#: The line before what the import adds to a Dockerfile; export cuts from it.
MARKER = "# --- added by agent-env bundle import harbor: the container as an AgentEnv env ---"
ADDED_LINES = f"""{MARKER}
USER root
COPY {SHELL_FILE} /opt/agentenv-harbor/{SHELL_FILE}
RUN PIP_BREAK_SYSTEM_PACKAGES=1 python3 -m pip install --no-cache-dir \\
    --disable-pip-version-check agentenv-framework-protocol
CMD ["python3", "/opt/agentenv-harbor/{SHELL_FILE}"]
"""
ENV_TOML = 'environment_name = "harbor"\n'
ARTIFACT_SUFFIX = "-harbor"
#: What the import copies into the artifact as it was (export writes them back).
KEPT = ("task.toml", "instruction.md", "tests", "solution")
DEFAULT_AGENT_TIMEOUT = 600.0
DOWNLOADS = re.compile(r"\b(pip3? install|uvx?\b|curl|wget|apt(-get)? install|npm install)")


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "task"


def task_folders(source: Path) -> list[Path]:
    """``source`` itself when it is a task folder, else its task subfolders (sorted)."""
    if (source / "task.toml").is_file():
        return [source]
    found = sorted(p for p in source.iterdir() if (p / "task.toml").is_file())
    if not found:
        raise UserError(f"{source}: no Harbor task here (a task folder holds task.toml, "
                        "instruction.md, environment/ and tests/test.sh)")
    return found


def _read_settings(folder: Path) -> dict[str, Any]:
    try:
        return tomllib.loads((folder / "task.toml").read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise UserError(f"{folder / 'task.toml'}: not valid TOML ({exc})") from None


def _seconds(settings: dict[str, Any], table: str, folder: Path) -> float | None:
    value = (settings.get(table) or {}).get("timeout_sec")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise UserError(f"{folder / 'task.toml'}: [{table}] timeout_sec must be a positive "
                        f"number of seconds, not {value!r}")
    return float(value)


def _name(settings: dict[str, Any], folder: Path) -> str:
    declared = (settings.get("task") or {}).get("name")
    return _slug(str(declared).rsplit("/", 1)[-1]) if declared else _slug(folder.name)


def _check(folder: Path) -> list[str]:
    problems = []
    environment = folder / "environment"
    if (environment / "docker-compose.yaml").is_file() or (
            environment / "docker-compose.yml").is_file():
        problems.append(f"{folder}: environment/docker-compose.yaml is not supported (give "
                        "environment/Dockerfile: one container)")
    elif not (environment / "Dockerfile").is_file():
        problems.append(f"{folder}: has no environment/Dockerfile")
    if not (folder / "instruction.md").is_file():
        problems.append(f"{folder}: has no instruction.md")
    else:
        try:
            (folder / "instruction.md").read_text(encoding="utf-8")
        except UnicodeDecodeError:
            problems.append(f"{folder}/instruction.md: not UTF-8 text (save it as UTF-8)")
    if not (folder / "tests" / "test.sh").is_file():
        problems.append(f"{folder}: has no tests/test.sh")
    for path in folder.rglob("*"):
        if path.is_symlink():
            problems.append(f"{path}: a symlink (copy the file in)")
    return problems


def _task_steps(name: str, instruction: str, agent_timeout: float | None) -> list[dict[str, Any]]:
    return [
        {"id": "deploy", "type": "deploy_env", "env_id": name},
        {"id": "agent", "type": "deploy_agent", "depends_on": ["deploy"], "env_ids": [name]},
        {"id": "solve", "type": "prompt_agent", "depends_on": ["agent"], "prompt": instruction,
         "timeout_seconds": agent_timeout or DEFAULT_AGENT_TIMEOUT},
        {"id": "tests", "type": "env_outcome_verifier", "depends_on": ["solve"], "env_id": name,
         "file_artifact_id": name + ARTIFACT_SUFFIX, "verifier_id": "reward",
         "score_aggregator": "weighted_average"},
    ]


class HarborFormat:
    """The ``harbor`` bundle format (see the module docstring)."""

    name = "harbor"
    description = "Harbor task folders (task.toml, instruction.md, environment/, tests/test.sh)"

    @classmethod
    def import_tasks(cls, source: Path, output: Path) -> list[str]:
        folders = task_folders(source)
        problems = [p for folder in folders for p in _check(folder)]
        planned: dict[str, Path] = {}
        settings: dict[Path, dict[str, Any]] = {}
        for folder in folders:
            settings[folder] = _read_settings(folder)
            _seconds(settings[folder], "agent", folder)
            _seconds(settings[folder], "verifier", folder)
            name = _name(settings[folder], folder)
            if name in planned:
                problems.append(f"{folder} and {planned[name]} are both task '{name}' (rename "
                                "one)")
            planned[name] = folder
        if problems:
            raise UserError("; ".join(problems))
        lines = []
        for name, folder in planned.items():
            lines += _import_one(name, folder, settings[folder], output)
        lines.append("Its tasks leave the agent to the run: give --agent ID (agent-env a2a-agent "
                     "list) or set [agents] default")
        return lines

    @classmethod
    def export_tasks(cls, bundle: Path, output: Path) -> list[str]:
        tasks = sorted((bundle / "tasks").glob("*.json")) if (bundle / "tasks").is_dir() else []
        if not tasks:
            raise UserError(f"{bundle}: no tasks/*.json (is it a bundle folder?)")
        lines, exported = [], 0
        for task in tasks:
            why = _export_one(bundle, task, output)
            if why:
                lines.append(f"skipped tasks/{task.name}: {why}")
            else:
                exported += 1
                lines.append(f"exported tasks/{task.name} -> {task.stem}/")
        if not exported:
            raise UserError(f"{bundle}: no task fits the Harbor format ("
                            + "; ".join(lines) + ")")
        return lines


def _import_one(name: str, folder: Path, settings: dict[str, Any], output: Path) -> list[str]:
    env = output / "envs" / name
    shutil.copytree(folder / "environment", env)
    dockerfile = (env / "Dockerfile").read_text(encoding="utf-8")
    if not dockerfile.endswith("\n"):
        dockerfile += "\n"
    (env / "Dockerfile").write_text(dockerfile + ADDED_LINES, encoding="utf-8")
    shutil.copyfile(TEMPLATES / SHELL_FILE, env / SHELL_FILE)
    (env / "env.toml").write_text(ENV_TOML, encoding="utf-8")

    artifact = output / "artifacts" / (name + ARTIFACT_SUFFIX)
    artifact.mkdir(parents=True)
    for kept in KEPT:
        source = folder / kept
        if source.is_dir():
            shutil.copytree(source, artifact / kept)
        elif source.is_file():
            shutil.copyfile(source, artifact / kept)
    shutil.copyfile(TEMPLATES / "verify.py", artifact / "verify.py")

    instruction = (folder / "instruction.md").read_text(encoding="utf-8")
    tasks = output / "tasks"
    tasks.mkdir(exist_ok=True)
    steps = _task_steps(name, instruction, _seconds(settings, "agent", folder))
    (tasks / f"{name}.json").write_text(json.dumps(steps, indent=2) + "\n", encoding="utf-8")

    lines = [f"imported {folder} -> tasks/{name}.json, envs/{name}/, "
             f"artifacts/{name}{ARTIFACT_SUFFIX}/"]
    environment = settings.get("environment") or {}
    unused = sorted(k for k in environment if k not in ("build_timeout_sec",))
    if unused:
        lines.append(f"  note: [environment] {', '.join(unused)} kept in task.toml, not "
                     "applied (env servers run with the sandbox's defaults and no route out)")
    if DOWNLOADS.search((folder / "tests" / "test.sh").read_text(errors="replace")):
        lines.append("  note: tests/test.sh seems to download (pip, uv, curl, apt...); the env "
                     "has no route out, so install what it needs in environment/Dockerfile")
    return lines


def _export_one(bundle: Path, task: Path, output: Path) -> str | None:
    """Write one task's Harbor folder; the reason it does not fit, else None."""
    try:
        steps = json.loads(task.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        return f"not valid JSON ({exc})"
    if not isinstance(steps, list) or not all(isinstance(s, dict) for s in steps):
        return "not a list of steps"
    by_type: dict[str, list[dict[str, Any]]] = {}
    for step in steps:
        by_type.setdefault(str(step.get("type")), []).append(step)
    deploys, prompts = by_type.get("deploy_env", []), by_type.get("prompt_agent", [])
    verifiers = by_type.get("env_outcome_verifier", [])
    if len(deploys) != 1 or len(prompts) != 1 or len(verifiers) != 1:
        return ("a Harbor task is one env, one prompt and one test run (deploy_env, "
                "prompt_agent, env_outcome_verifier once each)")
    env = bundle / "envs" / str(deploys[0].get("env_id"))
    artifact = bundle / "artifacts" / str(verifiers[0].get("file_artifact_id"))
    dockerfile = env / "Dockerfile"
    if not dockerfile.is_file() or MARKER not in dockerfile.read_text(encoding="utf-8"):
        return f"env {env.name} is not a Harbor container (its Dockerfile has no import marker)"
    if not (artifact / "tests" / "test.sh").is_file() or not (artifact / "task.toml").is_file():
        return f"artifact {artifact.name} has no tests/test.sh and task.toml"
    prompt = prompts[0].get("prompt")
    if not isinstance(prompt, str) or not prompt:
        return "its prompt_agent has no text prompt"

    target = output / task.stem
    shutil.copytree(env, target / "environment",
                    ignore=shutil.ignore_patterns(SHELL_FILE, "env.toml", "__pycache__"))
    text = dockerfile.read_text(encoding="utf-8")
    (target / "environment" / "Dockerfile").write_text(text[: text.index(MARKER)],
                                                       encoding="utf-8")
    for kept in KEPT:
        source = artifact / kept
        if source.is_dir():
            shutil.copytree(source, target / kept,
                            ignore=shutil.ignore_patterns("__pycache__"))
        elif source.is_file():
            shutil.copyfile(source, target / kept)
    (target / "instruction.md").write_text(prompt, encoding="utf-8")  # the prompt as edited
    return None
