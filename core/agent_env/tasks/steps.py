"""The base class of every step type, and how a step's JSON becomes a step object.

A step type is an attrs class whose fields are the step's JSON keys, with a class attribute
``type`` and an ``async run(ctx)``; plugins contribute them through ``agent_env_step_types``::

    @attrs.define(kw_only=True)
    class Ping(Step):
        type = "ping"
        entity_fields = {"env_id": "envs"}   # rewritten to bundle ids, checked at preflight

        env_id: str
        times: int = 1

        async def run(self, ctx: TaskContext) -> None:
            env = ctx.env(self.env_id)
            ...

The keys every step has (``id``, ``depends_on``, ``fail_task_on_error``, ``retry_config``,
``description``) live here. A key the class has no field for, or a value of the wrong type, is a
preflight problem, reported with every other problem of the bundle before anything runs.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

import attrs

if TYPE_CHECKING:
    from agent_env.sandbox.base import ExecResult, Sandbox
    from agent_env.tasks.context import TaskContext

#: Keys the engine reads from every step (``type`` selects the class and is not a field).
COMMON_KEYS = (
    "id", "type", "depends_on", "fail_task_on_error", "retry_config", "description", "version"
)


class StepError(Exception):
    """A step failed for a reason its message explains; the run records it without a traceback."""


class UnstorableValue(StepError):
    """A step produced a value no store can hold (NaN, infinity, a record past its size): the
    step fails, naming it, before anything tries to store it."""


class InfraError(StepError):
    """The run could not be carried out, for a reason that is not the agent's doing.

    A container that died, an image that failed to build, a model upstream that could not be
    reached: the run ends as ``error``, counted apart from failures and never scored, so an
    outage does not read as a model that scored 0. Sandbox errors count as this too.
    """


async def exec_for_step(sandbox: Sandbox, command: str | list[str], **options: Any) -> ExecResult:
    """``sandbox.exec`` for a step that judges what the command did: a lost sandbox (exit code
    -1) is an :class:`InfraError`, so a sandbox the service ended mid-run is never scored as
    the agent's failure."""
    result = await sandbox.exec(command, **options)
    if result.lost:
        detail = result.stderr.strip()[-300:] or "it stopped answering"
        raise InfraError(f"the sandbox was lost while running {_short(command)}: {detail}")
    return result


def _short(command: str | list[str]) -> str:
    text = command if isinstance(command, str) else " ".join(command)
    return repr(text if len(text) <= 80 else text[:77] + "...")


@attrs.frozen
class RetryConfig:
    """Roll back from ``retry_from_step_id`` (the step itself by default) and run again."""

    retry_from_step_id: str | None = None
    max_retries: int = 1


@attrs.frozen
class PreflightView:
    """What a step may consult while the plan is checked (nothing runs, nothing is written).

    ``entities`` maps an entity kind (``artifacts``, ``envs``, ``tasks``, ``evals``) to the ids
    that will exist when the task runs: the bundle's own plus, for stored tasks, the store's.
    ``versions`` maps ``(kind, id)`` to the highest version the run may load (the store's
    latest; one more for the bundle's own, which the run may store anew); an id missing from
    it cannot be judged here.
    """

    step_ids: frozenset[str]
    entities: Mapping[str, frozenset[str]] = attrs.field(factory=dict)
    sandbox_providers: frozenset[str] = frozenset()
    versions: Mapping[tuple[str, str], int] = attrs.field(factory=dict)

    def has_entity(self, kind: str, entity_id: str) -> bool:
        return entity_id in self.entities.get(kind, frozenset())


class ChoiceProblem(str):
    """A :meth:`Step.needs` problem with a choice of the run itself (``--agent nosuch``), not
    with the step: said once for the whole run, without the step's label."""

    __slots__ = ()


@attrs.frozen
class RunChoices:
    """What the caller of a run chose for every task in it (``--model``, ``--agent``,
    ``--user-model``, ``--judge-model``, ``--gateway-env-id``, ``--service-db-env-id``...): a
    step that uses one takes it over its own (``model`` of a prompt, the agent a deploy brings
    up, the model that plays a conversation's user); ``judge_model`` judges every rubric (the
    reference's precedence).
    ``agent_sandbox`` and ``env_sandbox`` (``--agent-sandbox``, ``--env-sandbox``) are the
    provider chains agents and envs deploy on; ``trajectory_filter``
    (``--[no-]trajectory-filter``) turns every rubric's trajectory filter on or off. A typed
    field of the run request and of :class:`TaskContext` (``ctx.choices``), and kept in the
    run's record (metadata ``model``, ``agent``...)."""

    model: str | None = None
    agent: str | None = None
    user_model: str | None = None
    judge_model: str | None = None
    agent_sandbox: str | None = None
    env_sandbox: str | None = None
    trajectory_filter: bool | None = None
    #: ``--gateway-env-id`` (``env deploy --gateway``): a stored gateway env (an env type
    #: with :attr:`~agent_env.env_types.EnvType.is_gateway`) every env deploys behind instead
    #: of the built-in gateway.
    gateway_env: str | None = None
    #: ``--litellm-api-key`` / ``--judge-litellm-api-key``: the upstream key model calls go
    #: with (replacing ``[model] api_key``), and the one judges' calls go with; a value or an
    #: ``env:NAME`` / ``secret:KEY`` reference, resolved where it is used
    #: (:func:`agent_env.models.upstream_key`). Never recorded.
    model_api_key: str | None = attrs.field(default=None, repr=False)
    judge_api_key: str | None = attrs.field(default=None, repr=False)
    #: ``--service-db-env-id`` (``env deploy --service-db``): a stored env state store (an env
    #: type with :attr:`~agent_env.env_types.EnvType.serves_env_state`) whose image every
    #: env state of the run runs, instead of the env type's own.
    service_db_env: str | None = None
    #: ``--auto-review approve|reject``: every ``review`` step decided so, nobody asked.
    auto_review: str | None = None

    def recorded(self) -> dict[str, str | bool]:
        """What the run's record keeps of them (the choices made; the keys are left out)."""
        return {key: value for key, value in attrs.asdict(self).items()
                if value is not None and value != "" and key not in _UNRECORDED}


_UNRECORDED = frozenset({"model_api_key", "judge_api_key"})


@attrs.define(kw_only=True)
class Step:
    """A step of a task. Subclasses add fields (their JSON keys) and implement :meth:`run`."""

    #: The ``type`` a task file names this step by.
    type: ClassVar[str] = ""
    #: Fields that name bundle entities, field name -> entity kind (``"artifacts"``...). A value
    #: naming one of the bundle's entities is rewritten to its id (``greeting`` ->
    #: ``@local/~/b/greeting``); preflight reports a value that names nothing. A field may hold a
    #: string, a list of strings, or an object keyed by them; ``name[].key`` is ``key`` of each
    #: object in the list ``name`` (``skills[].artifact_id``).
    entity_fields: ClassVar[dict[str, str]] = {}
    #: Fields that pin the version of an entity another field names, version field -> id
    #: field (``{"artifact_version": "artifact_id"}``). Preflight refuses a version the run
    #: cannot load; :meth:`pinned` gives it to ``run``, and the loaded version is recorded.
    version_fields: ClassVar[dict[str, str]] = {}
    #: Entity fields whose value may instead name what a plugin installs (an agent by its
    #: name): one that names nothing in the bundle is then the step's ``needs`` to judge.
    installed_entity_fields: ClassVar[frozenset[str]] = frozenset()
    #: What the step does to the agent its ``agent_name`` names, if any (``deploys``,
    #: ``prompts``, ``reads_reply``: see :mod:`agent_env.agents`); the episode API reads it to
    #: stand a trainer in for that agent.
    agent_role: ClassVar[str | None] = None
    #: One step of this type as a task file has it, shown in the generated step reference and
    #: checked by the docs tests (a type a shipped bundle uses is shown from that bundle).
    example: ClassVar[dict[str, Any] | None] = None

    id: str
    depends_on: list[str] | None = None
    fail_task_on_error: bool = True
    retry_config: RetryConfig | None = None
    description: str | None = None
    #: Kept for task files written for the reference, which carry a step version.
    version: int | None = None

    @classmethod
    def adapt(cls, raw: dict[str, Any]) -> dict[str, Any]:
        """``raw`` (this type's step, as a task file has it) with other spellings of this type's
        keys rewritten to ours, before preflight reads it: the names and shapes task files
        written for the reference framework use (``command`` for ``test_command``...). What
        is stored and run is the result. Default: ``raw`` as it is."""
        return raw

    async def run(self, ctx: TaskContext) -> None:
        """Do the step's work. Raise (ideally :class:`StepError`) to fail it."""
        raise NotImplementedError(f"step type '{self.type}' does not implement run()")

    async def prepare(self, ctx: TaskContext) -> None:
        """Warm up for ``run`` while earlier steps work: awaited in the background from the
        moment the task starts (a verifier loading its script's imports while the env
        deploys). Best effort: whatever it raises is logged and ignored, it is cancelled
        when the task ends, and ``run`` must not depend on it having finished."""

    def needs(self, choices: RunChoices) -> list[str]:
        """What a real run of this step would find missing that the task file cannot show (a
        model nobody answers, an agent nobody ships), given the run's ``choices``. Asked with
        the runtime up, after preflight and before anything is written; ``--dry-run`` lists
        every one. A problem with a choice itself is a :class:`ChoiceProblem`, said once for
        the whole run. Default: nothing."""
        return []

    def check(self, view: PreflightView) -> list[str]:
        """Extra preflight problems (messages without the ``step 'x':`` prefix)."""
        problems = []
        for field_name, kind in self.entity_fields.items():
            for value in entity_values(self, field_name):
                if _is_url(value) or field_name in self.installed_entity_fields:
                    continue
                if not view.has_entity(kind, value):
                    singular = kind.rstrip("s")
                    problems.append(f"{field_name} '{value}' names no {singular} in this bundle")
        for version_field, id_field in self.version_fields.items():
            version, named = getattr(self, version_field, None), getattr(self, id_field, None)
            if version is None:
                continue
            if isinstance(version, bool) or not isinstance(version, int) or version < 1:
                problems.append(f"{version_field} must be a version number (1 or more), not "
                                f"{version!r}")
                continue
            if not isinstance(named, str):
                problems.append(f"{version_field} pins a version of {id_field}, which is not "
                                "given")
                continue
            kind = self.entity_fields[id_field]
            highest = view.versions.get((kind, named))
            if highest is not None and version > highest:
                stored = f"the latest is v{highest}" if highest else "none is stored"
                problems.append(f"{version_field} {version}: {kind.rstrip('s')} '{named}' has "
                                f"no version {version} ({stored})")
        return problems

    def pinned(self, id_field: str) -> int | None:
        """The version a version field pins for the entity ``id_field`` names (None: the
        run's version, the latest)."""
        for version_field, named in self.version_fields.items():
            if named == id_field:
                value = getattr(self, version_field, None)
                return value if isinstance(value, int) else None
        return None

    @property
    def is_fatal(self) -> bool:
        return self.fail_task_on_error


def entity_values(source: Any, field: str) -> list[str]:
    """The entity names or ids the entity field ``field`` holds in ``source`` (a step, or a raw
    step's dict): see :attr:`Step.entity_fields` for the shapes."""
    name, _, key = field.partition("[].")
    value = source.get(name) if isinstance(source, Mapping) else getattr(source, name, None)
    if key:
        return [item[key] for item in value if isinstance(item, Mapping)
                and isinstance(item.get(key), str)] if isinstance(value, list) else []
    if isinstance(value, str):
        return [value]
    if isinstance(value, list | dict):
        return [v for v in value if isinstance(v, str)]
    return []


def _is_url(value: str) -> bool:
    return value.startswith(("http://", "https://", "s3://", "gs://", "file://"))


def renamed_keys(raw: dict[str, Any], names: dict[str, str]) -> dict[str, Any]:
    """A copy of ``raw`` with each key of ``names`` renamed to its value (unless that key is
    there too): how a :meth:`Step.adapt` reads another spelling of a key as ours."""
    out = dict(raw)
    for theirs, ours in names.items():
        if theirs in out and ours not in out:
            out[ours] = out.pop(theirs)
    return out


def rewrite_entity_refs(
    raw: Mapping[str, Any], step_class: type[Step], ids: Mapping[str, Mapping[str, str]]
) -> dict[str, Any]:
    """A copy of a raw step whose entity fields name ids (``ids[kind][name] -> id``)."""
    out = dict(raw)
    for field_name, kind in step_class.entity_fields.items():
        names = ids.get(kind, {})
        field_name, _, key = field_name.partition("[].")
        value = out.get(field_name)
        if key:  # a key of each object in a list
            if isinstance(value, list):
                out[field_name] = [
                    {**item, key: names.get(item[key], item[key])}
                    if isinstance(item, Mapping) and isinstance(item.get(key), str) else item
                    for item in value]
        elif isinstance(value, str):
            out[field_name] = names.get(value, value)
        elif isinstance(value, list):
            out[field_name] = [names.get(v, v) if isinstance(v, str) else v for v in value]
        elif isinstance(value, dict):  # keyed by entity (``artifact_versions``)
            out[field_name] = {names.get(k, k): v for k, v in value.items()}
    return out


# -- JSON -> step objects (cattrs at the edge) ---------------------------------------------


@functools.cache
def _converter() -> Any:
    import cattrs

    converter = cattrs.Converter(forbid_extra_keys=True, prefer_attrib_converters=True)

    def strict_bool(value: Any, _type: Any) -> bool:
        if not isinstance(value, bool):
            raise TypeError(f"expected true or false, got {value!r}")
        return value

    def strict_str(value: Any, _type: Any) -> str:
        if not isinstance(value, str):
            raise TypeError(f"expected a string, got {value!r}")
        return value

    def strict_int(value: Any, _type: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"expected an integer, got {value!r}")
        return value

    def strict_float(value: Any, _type: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise TypeError(f"expected a number, got {value!r}")
        return float(value)

    def is_sequence(type_: Any) -> bool:
        import collections.abc
        import typing

        return typing.get_origin(type_) in (list, tuple, set, frozenset,
                                            collections.abc.Sequence)

    def strict_sequence(type_: Any) -> Any:
        """cattrs would read a string as a list of its characters ("echo" as e, c, h, o)."""
        import typing

        origin, args = typing.get_origin(type_), typing.get_args(type_)
        fixed = origin is tuple and not (len(args) == 2 and args[1] is Ellipsis)
        make = list if origin not in (tuple, set, frozenset) else origin

        def structure(value: Any, _type: Any) -> Any:
            if isinstance(value, str | bytes | dict) or not hasattr(value, "__iter__"):
                raise TypeError(f"expected a list, got {value!r}")
            items = list(value)
            if fixed:
                if len(items) != len(args):
                    raise TypeError(f"expected {len(args)} items, got {len(items)}")
                return tuple(converter.structure(v, t) for v, t in zip(items, args,
                                                                        strict=True))
            inner = args[0] if args else Any
            return make(converter.structure(v, inner) for v in items)
        return structure

    converter.register_structure_hook_factory(is_sequence, strict_sequence)
    converter.register_structure_hook(bool, strict_bool)
    converter.register_structure_hook(str, strict_str)
    converter.register_structure_hook(int, strict_int)
    converter.register_structure_hook(float, strict_float)
    return converter


def structure_step(step_class: type[Step], raw: Mapping[str, Any]) -> Step:
    """Build ``step_class`` from a raw step; raises ``ValueError`` with every problem found."""
    data = {k: v for k, v in raw.items() if k != "type"}
    known = {f.name for f in attrs.fields(step_class)}
    unknown = sorted(set(data) - known)
    if unknown:
        listed = ", ".join(f"'{k}'" for k in unknown)
        raise ValueError(
            f"{'key' if len(unknown) == 1 else 'keys'} {listed} "
            f"{'is' if len(unknown) == 1 else 'are'} not known to '{step_class.type}' "
            f"(it takes: {', '.join(sorted(known))})"
        )
    depends_on = data.get("depends_on")
    if depends_on is not None and not (
        isinstance(depends_on, list) and all(isinstance(d, str) for d in depends_on)
    ):
        raise ValueError("depends_on must be a list of step ids (e.g. [\"a\"]), not "
                         f"{type(depends_on).__name__} {depends_on!r}")
    import cattrs

    try:
        return _converter().structure(data, step_class)
    except cattrs.BaseValidationError as exc:
        raise ValueError("; ".join(_describe(m) for m in cattrs.transform_error(exc))) from None
    except (TypeError, ValueError) as exc:
        raise ValueError(str(exc)) from None


def _describe(message: str) -> str:
    """cattrs says ``required field missing @ $.x``; we say ``x: required field missing``."""
    text, _, where = message.rpartition(" @ ")
    where = where.removeprefix("$").lstrip(".")
    return f"{where}: {text}" if where else message
