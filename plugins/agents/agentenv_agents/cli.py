"""``agent-env a2a-agent``: the agents plugins ship (``agent_env_agents``), the agents users
register (``put``: versioned entities, see :mod:`.stored`), and agents deployed
on their own.

``validate`` runs a task that deploys the agent, scores its A2A card (``verify_agent_card``)
and its reply to one prompt answered by a scripted model (no upstream needed), runs the A2A
validators on it (core protocol, trajectory, agent-config identity, skill-config, system
prompt: an extension the card does not declare is skipped, see :mod:`.a2a_validators`), and
tears down.

``deploy`` brings one agent up as ``deploy_agent`` would in a task (its own sandbox, its model
gateway, its A2A server behind a bearer token) and exits; the deployment lives until its TTL or
``a2a-agent teardown``, recorded in the deployments ledger like ``env deploy``'s (``gc``
enforces the expiry). The token is printed once, never stored.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from agent_env.api import ENTITY_ID, TTL_SECONDS, VERSION, echo, option_chain

if TYPE_CHECKING:
    from .a2a_type import A2aAgent


def _rows() -> list[dict[str, Any]]:
    from agent_env.api import ACTIVE, current

    host = current().host
    rows = []
    for contribution in host.contributions("agent"):
        if contribution.status != ACTIVE:
            continue
        record = host.record(contribution.plugin)
        source = contribution.obj
        rows.append({
            "id": source.name, "aliases": list(source.aliases), "path": str(source.path),
            "package": record.distribution if record else contribution.plugin,
        })
    return sorted(rows, key=lambda r: r["id"])


@click.group("a2a-agent")
def a2a_agent() -> None:
    """The A2A agents installed plugins ship."""


@a2a_agent.command("list")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def list_agents(as_json: bool) -> None:
    """Every installed agent (id, its type, what its image pins, whether that image is built
    on the local engine, the plugin that ships it), then every stored one (id, latest
    version)."""
    import asyncio

    from .definitions import pinned, read_agent
    from .stored import stored_rows

    rows = _rows()
    stored = stored_rows()
    definitions = {}
    for row in rows:
        try:
            definition = read_agent(row["id"], Path(row["path"]))
            row["type"], row["description"] = definition.type, definition.description
            row["pinned"] = pinned(definition)
            definitions[row["id"]] = definition
        except Exception as exc:  # one broken folder must not hide the others
            row["type"], row["description"] = "?", f"unreadable: {exc}"
            row["pinned"] = []
    built = asyncio.run(_built(list(definitions.values())))
    for row in rows:
        row["built"] = built.get(row["id"])
    if as_json:
        click.echo(json.dumps({"format_version": 1, "agents": rows, "stored": stored},
                              indent=2))
        return
    if not rows and not stored:
        echo("No agents are installed (an agents plugin ships them) or stored (a2a-agent put).")
        return
    width = max(len(r["id"]) for r in [*rows, *stored])
    pins = {r["id"]: ", ".join(r["pinned"]) or "-" for r in rows}
    states = {r["id"]: _built_word(r["built"]) for r in rows}
    pin_width = max([len(p) for p in pins.values()] or [1])
    state_width = max([len(s) for s in states.values()] or [1])
    for row in rows:
        echo(f"{row['id'].ljust(width)}  {row['type']:<6}  {pins[row['id']].ljust(pin_width)}  "
             f"{states[row['id']].ljust(state_width)}  {row['package']}  "
             f"{row['description']}".rstrip())
    for row in stored:
        echo(f"{row['id'].ljust(width)}  v{row['version']:<5}  stored (a2a-agent put)")


def _built_word(state: Any) -> str:
    if state is None:
        return "-"  # no image of its own to build (nop, oracle)
    if isinstance(state, str):
        return state
    return "built" if state else "not built"


async def _built(definitions: list[Any]) -> dict[str, Any]:
    """agent id -> True/False (its folder's image is on the local engine), or a short reason
    when that cannot be told. An agent that builds no image is left out."""
    import asyncio

    from agent_env.api import (
        PROTOCOL_LABEL,
        SOURCE_DIGEST_LABEL,
        UserError,
        open_provider,
        owned_scratch,
        plan_build,
    )

    from .a2a_type import AGENT_LABEL, build_context

    wanted = [d for d in definitions if d.type == "a2a"]
    if not wanted:
        return {}
    try:
        provider = open_provider("docker")
        problem = type(provider).availability()
    except UserError as exc:
        problem = str(exc)
    if problem is not None:
        return {d.name: "engine unavailable" for d in wanted}
    async def state(definition: Any) -> Any:
        if definition.image:
            return "given image"
        with owned_scratch("agent-env-agent-") as folder:
            plan = plan_build(build_context(definition, folder), name=definition.name)
        labels = {AGENT_LABEL: definition.name, **{
            k: plan.labels[k] for k in (SOURCE_DIGEST_LABEL, PROTOCOL_LABEL) if k in plan.labels}}
        found = await provider.find_images(labels)
        return bool(found) if found is not None else "unknown"

    states = await asyncio.gather(*(state(d) for d in wanted))  # the engine answers slowly
    return {d.name: s for d, s in zip(wanted, states, strict=True)}


@a2a_agent.command("build")
@click.option("--id", "agent_id", type=ENTITY_ID, required=True,
              help="The agent's id (installed or stored).")
@click.option("--version", type=VERSION, help="A stored agent's version (default: the latest).")
@click.option("--sandbox", metavar="A[,B...]",
              help="Sandbox providers to build on (default: docker).")
def build_agent(agent_id: str, version: int | None, sandbox: str | None) -> None:
    """Build the agent's image ahead of a run, with the build's progress; a run then finds it
    (content-hash tag) and starts at once."""
    import asyncio

    from agent_env.api import UserError, check_sandbox_chain

    from .lookup import find_agent

    definition = find_agent(agent_id, version)
    if definition.type != "a2a":
        raise UserError(f"agent '{agent_id}' is a {definition.type} agent: it has no image to "
                        "build")
    chain = option_chain(sandbox) or ["docker"]
    check_sandbox_chain(chain)
    image = asyncio.run(_build(definition, chain))
    echo(f"agents/{definition.name}: {image}")


async def _build(definition: Any, chain: list[str]) -> str:
    import asyncio
    import time

    from agent_env.api import SandboxSpec, choose_provider, open_provider

    from .a2a_type import agent_image

    provider = open_provider(choose_provider(chain))
    sandbox = await provider.create(SandboxSpec(
        name=f"build-{definition.name}", mode="vm", ttl_seconds=3600,
        labels={"agentenv.agent-build": definition.name}))
    started = time.monotonic()
    try:
        image = await agent_image(sandbox, definition, echo)
    finally:
        await asyncio.shield(sandbox.terminate())
    echo(f"agents/{definition.name}: done in {time.monotonic() - started:.1f}s")  # not on failure
    return image


@a2a_agent.command("get")
@click.option("--id", "agent_id", type=ENTITY_ID, required=True,
              help="The agent's id or alias.")
@click.option("--version", type=VERSION, help="A stored agent's version (default: the latest).")
def get_agent(agent_id: str, version: int | None) -> None:
    """One agent's definition (its agent.toml, read), as JSON; a stored one's version too."""
    import attrs

    from agent_env.api import UserError

    from .lookup import find_agent
    from .stored import installed_agent, stored_record

    installed = installed_agent(agent_id) is not None
    if version is not None and installed:
        raise UserError(f"agent '{agent_id}' is installed, not stored: it has no versions "
                        "(drop --version)")
    definition = find_agent(agent_id, version)
    shown = attrs.asdict(definition)
    record = None if installed else stored_record(agent_id, version)
    if record is not None:
        shown.update(version=record.version, content_hash=record.content_hash,
                     files=sorted(record.body.get("files") or {}),
                     created_at_utc=record.created_at_utc.isoformat())
    click.echo(json.dumps(shown, indent=2, default=str))


#: The reference's default ``--platform``; an image builds for the machine it is built on.
DEFAULT_PLATFORM = "linux/amd64"


def host_platform() -> str:
    """``linux/<arch>`` of this machine, as Docker names platforms."""
    import platform

    machine = platform.machine().lower()
    return "linux/" + {"x86_64": "amd64", "aarch64": "arm64"}.get(machine, machine)


def _pairs(option: str, given: tuple[str, ...]) -> dict[str, str]:
    out = {}
    for item in given:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"{item!r} is not KEY=VALUE", param_hint=f"'{option}'")
        out[key.strip()] = value
    return out


def _metadata_value(text: str) -> Any:
    """``true``/``false`` and numbers as TOML would read them; anything else as text."""
    try:
        value = json.loads(text)
    except ValueError:
        return text
    return value if isinstance(value, bool | int | float) else text


@a2a_agent.command("put")
@click.option("--id", "agent_id", type=ENTITY_ID, required=True, help="The agent's id.")
@click.option("--folder", "--context", "folder", type=click.Path(path_type=Path),
              help="The agent's folder (also --context): its Dockerfile, and an agent.toml "
                   "when it sets more than the defaults.")
@click.option("--image-ref", help="A prebuilt A2A agent image to run instead of a folder.")
@click.option("--dockerfile", metavar="PATH",
              help="The Dockerfile to build, relative to the folder (default: Dockerfile).")
@click.option("--env-var", "env_vars", multiple=True, metavar="K=V",
              help="An environment variable the agent always gets; repeatable.")
@click.option("--metadata", "metadata", multiple=True, metavar="K=V",
              help="An agent.toml [metadata] value (default_model, min_disk_size_gb, "
                   "takes_credentials); repeatable.")
@click.option("--default-model", metavar="NAME",
              help="The model the agent asks for when a run names none.")
@click.option("--min-disk-size-gb", type=click.FloatRange(min=0, min_open=True),
              help="Kept in the agent's [metadata]; no provider here sizes a disk.")
@click.option("--platform", default=DEFAULT_PLATFORM, show_default=True,
              help="The image platform; images build for this machine's own.")
@click.option("--skip-validation", is_flag=True,
              help="Accepted as the reference spells it: put never validates unless "
                   "--validate says so.")
@click.option("--validate", "then_validate", is_flag=True,
              help="Then run a2a-agent validate on the version stored.")
@click.pass_context
def put(click_ctx: click.Context, agent_id: str, folder: Path | None, image_ref: str | None,
        dockerfile: str | None, env_vars: tuple[str, ...], metadata: tuple[str, ...],
        default_model: str | None, min_disk_size_gb: float | None, platform: str,
        skip_validation: bool, then_validate: bool) -> int:
    """Store an agent as the next version of ID (unchanged sources: the same version).

    --dockerfile, --env-var, --metadata, --default-model and --min-disk-size-gb are written
    into the stored agent.toml (over the folder's own, which is left as it is)."""
    from .stored import AgentSettings, put_agent

    if skip_validation and then_validate:
        raise click.UsageError("give --validate or --skip-validation, not both")
    if platform != host_platform():
        raise click.BadParameter(f"{platform}: images build for this machine's platform "
                                 f"here ({host_platform()}); leave it out",
                                 param_hint="'--platform'")
    values: dict[str, Any] = {key: _metadata_value(value)
                              for key, value in _pairs("--metadata", metadata).items()}
    if default_model:
        values["default_model"] = default_model
    if min_disk_size_gb is not None:
        values["min_disk_size_gb"] = min_disk_size_gb
    settings = AgentSettings(dockerfile, _pairs("--env-var", env_vars), values)
    line = put_agent(agent_id, folder, image_ref, settings)
    echo(str(line))
    if then_validate:
        return int(click_ctx.invoke(validate, agent_id=agent_id, version=line.version,
                                    sandbox=None) or 0)
    return 0


VALIDATE_SCRIPT = "agent-env-validate"
VALIDATE_REPLY = "agent-env validate: ready"


@a2a_agent.command("validate")
@click.option("--id", "agent_id", type=ENTITY_ID, required=True,
              help="The agent's id (installed or stored).")
@click.option("--version", type=VERSION, help="A stored agent's version (default: the latest).")
@click.option("--sandbox", metavar="A[,B...]", help="Sandbox providers (a fallback chain).")
def validate(agent_id: str, version: int | None, sandbox: str | None) -> int:
    """Deploy the agent, score its A2A card, its reply to one scripted prompt and each
    extension it declares (the A2A validators), tear down.

    The prompt's model is a scripted one answering a fixed text, so no upstream or key is
    needed; the agent passes when its reply carries that text."""
    import secrets

    from agent_env.api import (
        ArtifactContent,
        ArtifactFile,
        MemoryArtifacts,
        RunRequest,
        TaskSpec,
        check_sandbox_chain,
        run_tasks,
    )

    from .lookup import find_agent

    definition = find_agent(agent_id, version)  # not there: one line before anything runs
    token = f"VALIDATOR-SP-{secrets.token_hex(6)}"
    # the second turn answers only when the system prompt the validator set reached the model
    script = {"name": VALIDATE_SCRIPT, "turns": [
        {"text": VALIDATE_REPLY}, {"match": {"system_contains": token}, "text": token}]}
    artifacts = MemoryArtifacts([ArtifactContent(VALIDATE_SCRIPT, 1, "file", (ArtifactFile(
        "script.json", json.dumps(script).encode(), 0o644),))])
    steps: list[dict[str, Any]] = [
        {"id": "model", "type": "scripted_model", "script_artifact_id": VALIDATE_SCRIPT},
        {"id": "deploy", "type": "deploy_agent", "a2a_agent_id": agent_id,
         "a2a_agent_version": version, "depends_on": ["model"]},
        {"id": "card", "type": "verify_agent_card", "depends_on": ["deploy"]},
        {"id": "ask", "type": "prompt_agent", "depends_on": ["deploy"],
         "prompt": "This is agent-env's validation prompt: answer with the model's reply.",
         "model": f"scripted:{VALIDATE_SCRIPT}", "timeout_seconds": 300},
        {"id": "reply", "type": "agent_prompt_response_verifier", "prompt_id": "ask",
         "depends_on": ["ask"],
         "criteria": [{"type": "response_contains", "needles": [VALIDATE_REPLY]}]},
        {"id": "core", "type": "verify_a2a_core_protocol", "prompt_id": "ask",
         "depends_on": ["reply"]},
        {"id": "trajectory", "type": "verify_a2a_trajectory", "prompt_id": "ask",
         "depends_on": ["core"]},
        {"id": "identity", "type": "verify_a2a_agent_config_identity",
         "depends_on": ["trajectory"]},
        {"id": "skills", "type": "verify_a2a_skill_config", "depends_on": ["identity"]},
        {"id": "system_prompt", "type": "verify_a2a_system_prompt", "token": token,
         "model": f"scripted:{VALIDATE_SCRIPT}", "timeout_seconds": 300,
         "depends_on": ["skills"]},
        {"id": "role", "type": "verify_a2a_role", "depends_on": ["system_prompt"]},
        {"id": "modalities", "type": "verify_a2a_modalities", "depends_on": ["role"],
         "probes": [{"modality": "text", "prompt_id": "ask", "expected": VALIDATE_REPLY}]},
    ]
    label = f"validate agent {definition.name}" + (f" v{version}" if version else "")
    spec = TaskSpec(f"{definition.name}.validate", label, tuple(steps), None)
    chain = option_chain(sandbox)
    if chain:
        check_sandbox_chain(chain)
    _, code = run_tasks([RunRequest(spec, artifacts, {})], sandbox_chain=chain)
    return code


# -- deployed on their own ------------------------------------------------------------------------

DEFAULT_TTL_SECONDS = 7200  # the reference's default


def _env_vars(values: tuple[str, ...]) -> dict[str, str]:
    from agent_env.api import UserError

    out = {}
    for value in values:
        name, sep, text = value.partition("=")
        if not sep or not name.strip():
            raise UserError(f"--env-var takes NAME=VALUE, not {value!r}")
        out[name.strip()] = text
    return out


async def _deploy(agent_id: str, env_vars: dict[str, str], ttl: int, chain: list[str] | None,
                  model: str | None, network_policy: str = "sealed",
                  allowed: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())
                  ) -> tuple[Any, A2aAgent]:
    """Run ``deploy_agent`` in a context of its own and keep what it brought up; on failure
    everything it brought up is taken down and nothing is recorded."""
    import asyncio
    import datetime as dt
    import secrets

    from agent_env.api import (
        DEPLOYMENT_LABEL,
        Deployment,
        MemoryArtifacts,
        RunChoices,
        StepError,
        TaskContext,
        UserError,
        deployments,
        utc_now,
    )

    from .a2a_type import A2aAgent
    from .steps import DeployAgent

    instance_id = f"{agent_id}-{secrets.token_hex(4)}"
    ctx = TaskContext(task_id=f"a2a-agent deploy {agent_id}", instance_id=instance_id,
                      artifacts=MemoryArtifacts(), sandbox_chain=chain,
                      choices=RunChoices(model=model),
                      labels={DEPLOYMENT_LABEL: instance_id})
    ctx.note_sink = lambda line: echo(line, err=True)
    step = DeployAgent(id="deploy", agent_name=agent_id, a2a_agent_id=agent_id,
                       env_vars=env_vars, ttl_seconds=ttl, network_policy=network_policy,
                       allow_hosts=list(allowed[0]), allow_cidrs=list(allowed[1]))
    created = utc_now()
    try:
        await step.run(ctx)
        agent = ctx.agents[agent_id]
        if not isinstance(agent, A2aAgent):  # e.g. a CLI agent played inside the task
            raise UserError(f"agent '{agent_id}' has no address of its own to deploy (its "
                            "agent type serves it only inside a task)")
        entry = Deployment(
            instance_id=instance_id, kind="agent", entity_id=agent_id, entity_version=0,
            provider=agent.sandbox.provider_name, sandbox_id=agent.sandbox.id,
            urls={"a2a": agent.url, "card": f"{agent.url}/.well-known/agent-card.json"},
            created_at=created, expires_at=created + dt.timedelta(seconds=ttl))
        deployments().add(entry)
    except BaseException as exc:
        await asyncio.shield(ctx.teardown.run())  # a failed deploy leaves nothing
        if isinstance(exc, StepError):
            raise UserError(f"deploying agent '{agent_id}' failed: {exc}") from None
        raise
    return entry, agent


@a2a_agent.command("deploy")
@click.option("--id", "agent_id", type=ENTITY_ID, required=True,
              help="The agent's id (a2a-agent list).")
@click.option("--env-var", "env_var", multiple=True, metavar="NAME=VALUE",
              help="Added to the agent's environment (repeatable).")
@click.option("--ttl-seconds", type=TTL_SECONDS, default=DEFAULT_TTL_SECONDS, show_default=True,
              help="Remove it after this long (agent-env gc does).")
@click.option("--sandbox", metavar="A[,B...]", help="Sandbox providers (a fallback chain).")
@click.option("--model", metavar="NAME", help="The model it uses unless a prompt names one "
                                              "(goes through its model gateway).")
@click.option("--network-policy", type=click.Choice(["sealed", "allowlist", "open"]),
              default=None, help="sealed (default): it reaches only its model gateway; "
              "allowlist: also the --allow-host/--allow-cidr ones (the default when any is "
              "given); open: it also has a route out.")
@click.option("--allow-host", "allow_host", multiple=True, metavar="HOST",
              help="A host it may reach (pypi.org, *.example.com; repeatable).")
@click.option("--allow-cidr", "allow_cidr", multiple=True, metavar="CIDR",
              help="A network it may reach (10.0.0.0/8; repeatable).")
@click.option("--json", "as_json", is_flag=True, help="Print the deployment as JSON.")
def deploy(agent_id: str, env_var: tuple[str, ...], ttl_seconds: int, sandbox: str | None,
           model: str | None, network_policy: str | None, allow_host: tuple[str, ...],
           allow_cidr: tuple[str, ...], as_json: bool) -> None:
    """Deploy an agent on its own; it stays up until its TTL or a2a-agent teardown."""
    import asyncio

    from agent_env.api import UserError, model_problem

    from .lookup import find_agent
    from .steps import DeployAgent

    network_policy = network_policy or ("allowlist" if allow_host or allow_cidr else "sealed")
    problems = DeployAgent(id="deploy", network_policy=network_policy,
                           allow_hosts=list(allow_host),
                           allow_cidrs=list(allow_cidr)).allowlist_problems()
    if problems:
        raise UserError(f"--allow-host/--allow-cidr: {problems[0]}")
    definition = find_agent(agent_id)
    env_vars = _env_vars(env_var)
    if model and (problem := model_problem(model)):
        raise UserError(f"--model: {problem}")
    chain = option_chain(sandbox)
    if chain:
        from agent_env.api import check_sandbox_chain

        check_sandbox_chain(chain)  # a provider that cannot be used: one line, nothing started
    entry, agent = asyncio.run(_deploy(definition.name, env_vars, ttl_seconds, chain, model,
                                       network_policy, (allow_host, allow_cidr)))
    token = agent.token
    if as_json:
        click.echo(json.dumps({**entry.to_json(), "token": token, "model": agent.model},
                              indent=2))
        return
    echo("Deployed!")
    echo(f"Instance ID: {entry.instance_id}")
    echo(f"A2A URL: {entry.urls['a2a']}")
    echo(f"Agent Card: {entry.urls['card']}")
    echo(f"Model: {agent.model or 'named per prompt (agent-config)'}")
    echo(f"Expires At (UTC): {entry.expires_at.strftime('%Y-%m-%d %H:%M:%S')}")
    if token:
        echo(f"Token: {token}  (send it as 'Authorization: Bearer <token>'; shown only "
                   "now)")
    echo(f"Tear it down with: agent-env a2a-agent teardown --id {entry.instance_id}")


@a2a_agent.command("list-instances")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def list_instances(as_json: bool) -> None:
    """Agents deployed on their own, with their expiry; expired ones say so."""
    from agent_env.api import list_deployed

    list_deployed("agent", as_json, "a2a")


@a2a_agent.command("get-instance")
@click.option("--id", "instance_id", type=ENTITY_ID, required=True,
              help="The instance id deploy printed.")
def get_instance(instance_id: str) -> None:
    """Print one deployed agent as JSON (its token is not stored, so not shown)."""
    from agent_env.api import get_deployed

    get_deployed("agent", instance_id)


@a2a_agent.command("teardown")
@click.option("--id", "instance_id", type=ENTITY_ID, help="The instance id deploy printed.")
@click.option("--all", "everything", is_flag=True, help="Every deployed agent.")
def teardown(instance_id: str | None, everything: bool) -> int:
    """Remove a deployed agent (its containers and sandbox) now; idempotent."""
    from agent_env.api import teardown_deployed

    return teardown_deployed("agent", instance_id, everything)


@a2a_agent.command("add-skill")
@click.option("--instance-id", required=True, help="The deployed agent (deploy's instance id).")
@click.option("--skill-artifact-id", metavar="ID",
              help="A stored skill (agent-env artifact skill put).")
@click.option("--skill-artifact-version", type=VERSION, help="Its version (default: latest).")
@click.option("--skill-md-path", type=click.Path(path_type=Path, dir_okay=False, exists=True),
              help="A SKILL.md to give as it is (named after its folder).")
@click.option("--skill-object-url", metavar="URL",
              help="Refused: skills are stored artifacts here (--skill-artifact-id).")
@click.option("--token", envvar="AGENT_ENV_TOKEN", metavar="TOKEN",
              help="The agent's token, as deploy printed it (default: $AGENT_ENV_TOKEN). It "
                   "is never stored, so a deployed agent cannot be reached without it.")
def add_skill(instance_id: str, skill_artifact_id: str | None,
              skill_artifact_version: int | None, skill_md_path: Path | None,
              skill_object_url: str | None, token: str | None) -> None:
    """Give a deployed agent one more skill, through its skill-config extension."""
    import asyncio

    from agent_env.api import UserError

    if skill_object_url:
        raise UserError("--skill-object-url is not supported here: skills are stored "
                        "artifacts (agent-env artifact skill put), given with "
                        "--skill-artifact-id")
    if (skill_artifact_id is None) == (skill_md_path is None):
        raise UserError("give one of --skill-artifact-id or --skill-md-path")
    if skill_md_path is not None:
        entry: dict[str, Any] = {"name": skill_md_path.resolve().parent.name or "skill",
                                 "skill_md": skill_md_path.read_text(encoding="utf-8")}
    else:
        entry = {"artifact_id": skill_artifact_id}
    names = asyncio.run(_add_skill(instance_id, entry, skill_artifact_version, token))
    echo(f"Added skill {', '.join(names)} to {instance_id}")


async def _add_skill(instance_id: str, entry: dict[str, Any], version: int | None,
                     token: str | None) -> list[str]:
    import aiohttp

    from agent_env.api import StepError, UserError, current, deployments, stored_artifacts

    from .a2a_type import post_ok
    from .skill_config import give_skills

    found = deployments().get(instance_id)
    if found is None or found.kind != "agent":
        raise UserError(f"no deployed agent '{instance_id}' (agent-env a2a-agent "
                        "list-instances shows them)")
    if found.expired():
        raise UserError(f"deployment {instance_id} has expired (agent-env gc removes it)")
    if not token:
        raise UserError("the agent's token is needed: pass --token (a2a-agent deploy printed "
                        "it) or set AGENT_ENV_TOKEN; it is never stored")

    async def load(artifact_id: str) -> dict[str, bytes]:
        try:
            content = await stored_artifacts().load(artifact_id, version)
        except LookupError as exc:
            raise UserError(f"--skill-artifact-id: {exc}") from None
        if content.type != "skill":
            raise UserError(f"--skill-artifact-id {artifact_id}: a {content.type} artifact, "
                            "not a skill (agent-env artifact skill put stores one)")
        return {item.path: item.data for item in content.files}

    async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {token}"}) as http:
        try:
            async with http.get(found.urls["card"],
                                timeout=aiohttp.ClientTimeout(total=10)) as resp:
                if resp.status in (401, 403):
                    raise UserError(f"deployment {instance_id}: the token is not this agent's")
                card = await resp.json(content_type=None)
        except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
            raise UserError(f"deployment {instance_id}: its agent does not answer "
                            f"({exc or type(exc).__name__})") from None
        try:
            return await give_skills(http, found.urls["a2a"], instance_id, dict(card or {}),
                                     [entry], load=load, post=post_ok,
                                     store=current().store("object"), open_agent=False,
                                     staging_prefix=f"staging/agent-skills/{instance_id}")
        except StepError as exc:
            if "answered HTTP 401" in str(exc) or "answered HTTP 403" in str(exc):
                raise UserError(f"deployment {instance_id}: the token is not this "
                                "agent's") from None
            raise UserError(str(exc)) from None
