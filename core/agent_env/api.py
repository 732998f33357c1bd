# ruff: noqa: F401
"""The public API for plugins: everything a plugin may import from the kernel, in one place.

Plugins import from here (``from agent_env.api import hookimpl, Step, TaskContext``) and from
``agentenv_protocol``, never from the kernel's other modules, so the kernel can reorganise its
internals without breaking a plugin; ``tests/unit/plugins/test_import_rule.py`` holds every
plugin in this repository to that. Importing this module is cheap (the CLI imports every plugin
at start-up): each name loads its module on first use.

Groups, in the order a plugin author meets them:

* hooks and what they return: ``hookimpl``, ``StoreBackend``, ``BundleSource``,
  ``LazyCommand`` (an ``agent_env_cli`` command imported only when it runs),
  ``AgentSource``, ``ModelProvider``, ``ImportReport`` (a bundle format's partial import),
  ``Lazy`` (a contribution imported only when a run uses it: keeps the CLI's start-up cheap);
* errors and logs: ``UserError``, ``ConfigError``, ``MissingPluginError``, ``get_logger``;
* the runtime: ``current()`` (config, plugin registries, stores, providers, and
  ``state`` where a plugin keeps what its settings decided), ``build_settings``;
* steps: ``Step``, ``StepError``, ``InfraError`` (ends a run as ``error``, not scored),
  ``exec_for_step`` (a command a check judges; a lost sandbox is an ``InfraError``),
  ``PreflightView``, ``TaskContext``, ``ScoreRow``,
  ``AGGREGATORS``, ``open_provider``, ``choose_provider``, ``create_in_chain`` (a sandbox
  on the first provider of a fallback chain that can make it);
* sandboxes: the provider contract (``SandboxProvider``, ``Sandbox``, ``SandboxSpec``,
  ``ContainerSpec`` with its ``Healthcheck`` and ``VolumeMount``, ``ExecResult``,
  ``shell_argv``, ``SandboxError``, ``SandboxUnsupported``, ``PathOutsideSandbox``,
  ``build_with_progress``, ``side_by_side``, ``CommittedImage``), ``DockerHostSandbox``,
  ``hermetic_context``, ``ownership_labels``, ``LoopClient`` (a cloud SDK's client per event
  loop, closed with it),
  and for cloud providers ``missing_sdk``, ``timed_argv``/``timed_result``,
  ``create_without_leaks`` and ``delete_with_retries`` (see :mod:`agent_env.sandbox.cloud`);
* deployments that outlive their command: ``Deployment``, ``deployments`` (the ledger),
  ``DEPLOYMENT_LABEL`` (see :mod:`agent_env.deployments`);
* images, for a provider that builds with an engine: ``plan_build`` and its ``BuildPlan``
  (engine-independent: tag, digests, labels), ``write_build_tar`` (the context as the engine
  gets it), ``from_refs``/``official_name`` (base images), ``image_slug``, the labels
  ``BUILD_DIGEST_LABEL``, ``BUILDER_LABEL``/``BUILDER`` and ``PROTOCOL_DISTRIBUTION``;
* stores: the interfaces, their errors, ``validate_key`` and ``MAX_VERSION``,
  ``bundle_value``, and ``query``: the document query language a document-store backend must
  implement (one contract module, like the interfaces: its fifteen functions and markers are
  used together, so they are exported as one name). The stores themselves are
  ``current().object_store``...;
* env types: the contract ``EnvType`` and ``EnvDeployment`` (see :mod:`agent_env.env_types`),
  the stored ``EnvSource`` a type deploys (``write_env_files`` lays its files out), the
  deploy defaults, and the env state a deploy asks for (``EnvStateChoice``, the durable
  ``EnvStateInstance``: see :mod:`agent_env.env_state`); seeding a deployed env's servers from
  environment artifacts (``seed_environments``, ``EnvDataError``, ``LoadedEnvironments``: see
  :mod:`agent_env.env_data`);
* agents: the contract agent types, agent steps and the episode API share (see
  :mod:`agent_env.agents`): ``Agent``, ``AgentReply``, ``Usage``, ``AgentSetup``,
  ``AgentDefinition``, ``AgentType``, the step roles and ``find_reply``; ``model_problem``
  (who answers a model name); ``RunChoices``/``ChoiceProblem`` (``--model``/``--agent``, what
  ``Step.needs`` is given);
* commands a plugin adds (``agent_env_cli``): ``echo``, the option types ``ENTITY_ID``,
  ``VERSION``, ``TTL_SECONDS``, ``option_chain``, ``check_sandbox_chain``, ``run_tasks`` (run
  requests with progress and a summary, as ``agent-env run`` does), ``list_deployed``,
  ``get_deployed``, ``teardown_deployed``; stored folders: ``folder_files``,
  ``put_files_entity``, ``stored_folder``; artifacts a run makes: ``put_artifact_bytes`` (a
  ``cli`` one with its ``CliSpec``; the type names ``CLI``...);
* evals: ``pass_at_k`` (the unbiased estimator the eval table uses); the leaderboard and
  comparisons ``eval report`` prints (``eval_group_counters``, ``eval_leaderboard``,
  ``eval_pass_curve``, ``eval_run_groups``, ``compare_run_groups``, ``render_leaderboard``,
  ``eval_histogram``, ``eval_buckets``, ``eval_group_version``: see
  :mod:`agent_env.evals.compare` and :mod:`agent_env.evals.stats`);
* runners: ``RunnerContext``, ``RunRequest``, ``TaskResult``, ``TeardownReport``,
  ``LocalRunner`` (what a remote runner runs on its workers), ``StoredInstances``, and
  leftover reaping by label (``find_leftovers``, ``remove_leftovers``, ``owner_label``,
  ``OWNER_LABEL``).

* episodes, for a plugin that serves tasks to a trainer: ``EpisodeSpec``, ``Episode``,
  ``EpisodeError``, ``Turn``, ``TurnTools``, ``EpisodeTask`` (``agent_env.task.Task``) and
  ``BundleTasks`` (:meth:`EpisodeTask.all_from_bundle`); a bundle's playable tasks and their
  rewards (``served_tasks``, ``ServedTasks``, ``ServedTask``, ``episode_reward``: see
  :mod:`agent_env.episodes.serving`); ``mean_score`` (a run's score, as an eval's table
  averages it); ``tool_result_text`` (an MCP result's text). Programs use ``agent_env.task``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

#: public name -> (module, attribute); attribute None means the module itself.
_EXPORTS: dict[str, tuple[str, str | None]] = {
    # hooks and contribution records
    "hookimpl": ("agent_env.hookspecs", "hookimpl"),
    "StoreBackend": ("agent_env.contributions", "StoreBackend"),
    "BundleSource": ("agent_env.contributions", "BundleSource"),
    "LazyCommand": ("agent_env.cli.lazy", "LazyCommand"),
    "ImportReport": ("agent_env.contributions", "ImportReport"),
    "AgentSource": ("agent_env.contributions", "AgentSource"),
    "ModelProvider": ("agent_env.contributions", "ModelProvider"),
    "Lazy": ("agent_env.contributions", "Lazy"),
    # errors and logs
    "UserError": ("agent_env.errors", "UserError"),
    "ConfigError": ("agent_env.errors", "ConfigError"),
    "MissingPluginError": ("agent_env.errors", "MissingPluginError"),
    "get_logger": ("agent_env.logs", "get_logger"),
    "missing_contribution": ("agent_env.plugins.reporting", "missing"),
    "ACTIVE": ("agent_env.plugins.discovery", "ACTIVE"),
    # the runtime and settings
    "current": ("agent_env.runtime", "current"),
    "build_settings": ("agent_env.settings", "build"),
    "read_toml": ("agent_env.config", "read_toml"),
    # steps
    "Step": ("agent_env.tasks.steps", "Step"),
    "StepError": ("agent_env.tasks.steps", "StepError"),
    "InfraError": ("agent_env.tasks.steps", "InfraError"),
    "exec_for_step": ("agent_env.tasks.steps", "exec_for_step"),
    "PreflightView": ("agent_env.tasks.steps", "PreflightView"),
    "step_of": ("agent_env.tasks.engine", "step_of"),
    # people in the loop: reviews and asks (a person playing an agent)
    "reviews": ("agent_env.reviews", "reviews"),
    "REVIEW_APPROVED": ("agent_env.reviews", "APPROVED"),
    "REVIEW_REJECTED": ("agent_env.reviews", "REJECTED"),
    "asks": ("agent_env.asks", "asks"),
    "ASK_AWAITING": ("agent_env.asks", "AWAITING"),
    "ASK_ANSWERED": ("agent_env.asks", "ANSWERED"),
    "ASK_EXPIRED": ("agent_env.asks", "EXPIRED"),
    "ASK_CANCELLED": ("agent_env.asks", "CANCELLED"),
    "RunChoices": ("agent_env.tasks.steps", "RunChoices"),
    "ChoiceProblem": ("agent_env.tasks.steps", "ChoiceProblem"),
    "TaskContext": ("agent_env.tasks.context", "TaskContext"),
    "ScoreRow": ("agent_env.tasks.scores", "ScoreRow"),
    "rows_from_results": ("agent_env.tasks.scores", "rows_from_results"),
    "AGGREGATORS": ("agent_env.tasks.scores", "AGGREGATORS"),
    "open_provider": ("agent_env.tasks.sandboxes", "open_provider"),
    "EnvStateChoice": ("agent_env.env_state", "EnvStateChoice"),
    "EnvStateInstance": ("agent_env.env_state", "EnvStateInstance"),
    "TaskSpec": ("agent_env.tasks.plan", "TaskSpec"),
    "ArtifactContent": ("agent_env.tasks.artifacts", "ArtifactContent"),
    "CLI": ("agent_env.tasks.artifacts", "CLI"),
    "CliSpec": ("agent_env.tasks.artifacts", "CliSpec"),
    "SKILL_FILE": ("agent_env.tasks.artifacts", "SKILL_FILE"),
    "ArtifactFile": ("agent_env.tasks.artifacts", "ArtifactFile"),
    "MemoryArtifacts": ("agent_env.tasks.artifacts", "MemoryArtifacts"),
    # env types (agent_env_env_types): the contract, and the stored env a type deploys
    "EnvType": ("agent_env.env_types", "EnvType"),
    "EnvDeployment": ("agent_env.env_types", "EnvDeployment"),
    "EnvSource": ("agent_env.env_types", "EnvSource"),
    "load_env_source": ("agent_env.env_types", "load_env_source"),
    "DEFAULT_TTL_SECONDS": ("agent_env.env_types", "DEFAULT_TTL_SECONDS"),
    "DEFAULT_READY_TIMEOUT": ("agent_env.env_types", "DEFAULT_READY_TIMEOUT"),
    "DEFAULT_GATEWAY_MODE": ("agent_env.env_types", "DEFAULT_GATEWAY_MODE"),
    "DEFAULT_ENV_NETWORK_POLICY": ("agent_env.env_types", "DEFAULT_ENV_NETWORK_POLICY"),
    "ENV_NETWORK_POLICIES": ("agent_env.env_types", "ENV_NETWORK_POLICIES"),
    "network_policy_problem": ("agent_env.env_types", "network_policy_problem"),
    "write_env_files": ("agent_env.env_types", "write_env_files"),
    # agents: the contract agent types, agent steps and the episode API share
    "Agent": ("agent_env.agents", "Agent"),
    "AgentReply": ("agent_env.agents", "AgentReply"),
    "Usage": ("agent_env.agents", "Usage"),
    "AgentSetup": ("agent_env.agents", "AgentSetup"),
    "AgentDefinition": ("agent_env.agents", "AgentDefinition"),
    "AgentType": ("agent_env.agents", "AgentType"),
    "AGENT_FILE": ("agent_env.agents", "AGENT_FILE"),
    "DEFAULT_AGENT_TYPE": ("agent_env.agents", "DEFAULT_AGENT_TYPE"),
    "DEFAULT_AGENT_NAME": ("agent_env.agents", "DEFAULT_AGENT_NAME"),
    "AGENT_ERROR": ("agent_env.agents", "AGENT_ERROR"),
    "INFRA_ERROR": ("agent_env.agents", "INFRA_ERROR"),
    "DEPLOYS": ("agent_env.agents", "DEPLOYS"),
    "PROMPTS": ("agent_env.agents", "PROMPTS"),
    "READS_REPLY": ("agent_env.agents", "READS_REPLY"),
    "JUDGE_ROLE": ("agent_env.agents", "JUDGE_ROLE"),
    "find_reply": ("agent_env.agents", "find_reply"),
    # the episode API, for plugins that serve tasks to trainers (OpenEnv, verifiers)
    "EpisodeSpec": ("agent_env.episodes.spec", "EpisodeSpec"),
    "Episode": ("agent_env.episodes.episode", "Episode"),
    "EpisodeError": ("agent_env.episodes.errors", "EpisodeError"),
    "EpisodeTask": ("agent_env.episodes.task_source", "Task"),
    "BundleTasks": ("agent_env.episodes.task_source", "BundleTasks"),
    "Reward": ("agent_env.episodes.serving", "Reward"),
    "ServedTask": ("agent_env.episodes.serving", "ServedTask"),
    "ServedTasks": ("agent_env.episodes.serving", "ServedTasks"),
    "served_tasks": ("agent_env.episodes.serving", "served_tasks"),
    "episode_reward": ("agent_env.episodes.serving", "reward_function"),
    "mean_score": ("agent_env.tasks.scores", "mean_score"),
    "Turn": ("agent_env.episodes.turns", "Turn"),
    "TurnTools": ("agent_env.episodes.turns", "TurnTools"),
    "tool_result_text": ("agent_env.episodes.turns", "result_text"),
    "default_agent_id": ("agent_env.agents", "default_agent_id"),
    "model_problem": ("agent_env.models", "model_problem"),
    "chat": ("agent_env.models", "chat"),
    "planned_folder": ("agent_env.bundles.planned", "planned_folder"),
    "cause": ("agent_env.errors", "cause"),
    "model_settings": ("agent_env.models", "model_settings"),
    "upstream_key": ("agent_env.models", "upstream_key"),
    # evals
    "pass_at_k": ("agent_env.evals.passk", "pass_at_k"),
    "eval_group_counters": ("agent_env.evals.compare", "group_counters"),
    "eval_histogram": ("agent_env.evals.stats", "merged_hist"),
    "eval_group_version": ("agent_env.evals.stats", "group_version"),
    "eval_buckets": ("agent_env.evals.stats", "buckets"),
    "eval_leaderboard": ("agent_env.evals.compare", "leaderboard"),
    "eval_pass_curve": ("agent_env.evals.compare", "pass_curve"),
    "eval_run_groups": ("agent_env.evals.compare", "eval_groups"),
    "compare_run_groups": ("agent_env.evals.compare", "compare"),
    "render_leaderboard": ("agent_env.evals.compare", "render_board"),
    "choose_provider": ("agent_env.tasks.sandboxes", "choose_provider"),
    "create_in_chain": ("agent_env.tasks.sandboxes", "create_in_chain"),
    # deployments that outlive their command (env deploy, a2a-agent deploy)
    "Deployment": ("agent_env.deployments", "Deployment"),
    "deployments": ("agent_env.deployments", "deployments"),
    "DEPLOYMENT_LABEL": ("agent_env.deployments", "DEPLOYMENT_LABEL"),
    "utc_now": ("agent_env.deployments", "utc_now"),
    # environment data: seeding a deployed env's servers (load_artifact, env ... load-*)
    "seed_environments": ("agent_env.env_data", "seed_environments"),
    "EnvDataError": ("agent_env.env_data", "EnvDataError"),
    "LoadedEnvironments": ("agent_env.env_data", "LoadedEnvironments"),
    # commands a plugin adds (agent_env_cli): output, option types, running tasks, deployments
    "echo": ("agent_env.cli.console", "echo"),
    "ENTITY_ID": ("agent_env.cli.params", "ENTITY_ID"),
    "VERSION": ("agent_env.cli.params", "VERSION"),
    "TTL_SECONDS": ("agent_env.cli.params", "TTL_SECONDS"),
    "option_chain": ("agent_env.sandbox.chain", "option_chain"),
    "check_sandbox_chain": ("agent_env.runs", "check_sandbox_chain"),
    "run_tasks": ("agent_env.runs", "run_tasks"),
    "list_deployed": ("agent_env.cli.deployed", "list_kind"),
    "get_deployed": ("agent_env.cli.deployed", "get_kind"),
    "teardown_deployed": ("agent_env.cli.deployed", "teardown_kind"),
    # sandboxes
    "SandboxProvider": ("agent_env.sandbox.base", "SandboxProvider"),
    "Sandbox": ("agent_env.sandbox.base", "Sandbox"),
    "SandboxSpec": ("agent_env.sandbox.base", "SandboxSpec"),
    "ContainerSpec": ("agent_env.sandbox.base", "ContainerSpec"),
    "Healthcheck": ("agent_env.sandbox.base", "Healthcheck"),
    "VolumeMount": ("agent_env.sandbox.base", "VolumeMount"),
    "DEFAULT_MEMORY_MB": ("agent_env.sandbox.base", "DEFAULT_MEMORY_MB"),
    "CommittedImage": ("agent_env.sandbox.base", "CommittedImage"),
    "ExecResult": ("agent_env.sandbox.base", "ExecResult"),
    "shell_argv": ("agent_env.sandbox.base", "shell_argv"),
    "SandboxError": ("agent_env.sandbox.base", "SandboxError"),
    "SandboxUnsupported": ("agent_env.sandbox.base", "SandboxUnsupported"),
    "PathOutsideSandbox": ("agent_env.sandbox.base", "PathOutsideSandbox"),
    "build_with_progress": ("agent_env.sandbox.base", "build_with_progress"),
    "side_by_side": ("agent_env.sandbox.base", "side_by_side"),
    "DockerHostSandbox": ("agent_env.sandbox.docker_host", "DockerHostSandbox"),
    "LoopClient": ("agent_env.sandbox.loop_client", "LoopClient"),
    "missing_sdk": ("agent_env.sandbox.cloud", "missing_sdk"),
    "timed_argv": ("agent_env.sandbox.cloud", "timed_argv"),
    "timed_result": ("agent_env.sandbox.cloud", "timed_result"),
    "create_without_leaks": ("agent_env.sandbox.cloud", "create_without_leaks"),
    "delete_with_retries": ("agent_env.sandbox.cloud", "delete_with_retries"),
    "hermetic_context": ("agent_env.sandbox.docker_host", "hermetic_context"),
    "ownership_labels": ("agent_env.sandbox.ownership", "ownership_labels"),
    "split_chain": ("agent_env.sandbox.chain", "split_chain"),
    # images: engine-independent build planning, for a provider that builds with an engine
    "BuildPlan": ("agent_env.images.plan", "BuildPlan"),
    "plan_build": ("agent_env.images.plan", "plan_build"),
    "write_build_tar": ("agent_env.images.plan", "write_build_tar"),
    "from_refs": ("agent_env.images.plan", "from_refs"),
    "official_name": ("agent_env.images.plan", "official_name"),
    "image_slug": ("agent_env.images.plan", "slugify"),
    "BUILD_DIGEST_LABEL": ("agent_env.images.plan", "BUILD_DIGEST_LABEL"),
    "SOURCE_DIGEST_LABEL": ("agent_env.images.plan", "SOURCE_DIGEST_LABEL"),
    "PROTOCOL_LABEL": ("agent_env.images.plan", "PROTOCOL_LABEL"),
    "BUILDER_LABEL": ("agent_env.images.plan", "BUILDER_LABEL"),
    "BUILDER": ("agent_env.images.plan", "BUILDER"),
    "PROTOCOL_DISTRIBUTION": ("agent_env.images.hermetic", "PROTOCOL_DISTRIBUTION"),
    # stores
    "DocumentStore": ("agent_env.stores.base", "DocumentStore"),
    "ObjectStore": ("agent_env.stores.base", "ObjectStore"),
    "ImageStore": ("agent_env.stores.base", "ImageStore"),
    "SecretStore": ("agent_env.stores.base", "SecretStore"),
    "RegistryAuth": ("agent_env.stores.base", "RegistryAuth"),
    "ObjectMeta": ("agent_env.stores.base", "ObjectMeta"),
    "PostPolicy": ("agent_env.stores.base", "PostPolicy"),
    "StoreError": ("agent_env.stores.base", "StoreError"),
    "ObjectNotFound": ("agent_env.stores.base", "ObjectNotFound"),
    "ObjectExists": ("agent_env.stores.base", "ObjectExists"),
    "InvalidObjectKey": ("agent_env.stores.base", "InvalidObjectKey"),
    "InvalidQuery": ("agent_env.stores.base", "InvalidQuery"),
    "InvalidUpdate": ("agent_env.stores.base", "InvalidUpdate"),
    "DuplicateKeyError": ("agent_env.stores.base", "DuplicateKeyError"),
    "UnsupportedOperation": ("agent_env.stores.base", "UnsupportedOperation"),
    "validate_key": ("agent_env.stores.base", "validate_key"),
    "MAX_VERSION": ("agent_env.stores.base", "MAX_VERSION"),
    "MAX_TASK_FILE_BYTES": ("agent_env.bundles.jsonfile", "MAX_FILE_BYTES"),
    "query": ("agent_env.stores.query", None),
    "bundle_value": ("agent_env.stores.secrets", "bundle_value"),
    "folder_files": ("agent_env.bundles.file_entities", "folder_files"),
    "put_files_entity": ("agent_env.bundles.file_entities", "put_files_entity"),
    "put_artifact_bytes": ("agent_env.bundles.file_entities", "put_artifact_bytes"),
    "stored_folder": ("agent_env.bundles.file_entities", "stored_folder"),
    "put_env": ("agent_env.bundles.file_entities", "put_env"),
    "put_settings_env": ("agent_env.bundles.file_entities", "put_settings_env"),
    "stored_env": ("agent_env.bundles.file_entities", "stored_env"),
    "stored_artifacts": ("agent_env.bundles.entities", "stored_artifacts"),
    "is_inside": ("agent_env.bundles.parse", "is_inside"),
    "FILE_DROPPED": ("agent_env.bundles.parse", "FILE_DROPPED"),
    "owned_scratch": ("agent_env.scratch", "owned_scratch"),
    # runners (agent_env_runners): what a runner receives, returns and may reuse
    "RunnerContext": ("agent_env.runners", "RunnerContext"),
    "LocalRunner": ("agent_env.runners.local", "LocalRunner"),
    "RunRequest": ("agent_env.tasks.session", "RunRequest"),
    "TaskResult": ("agent_env.tasks.engine", "TaskResult"),
    "TeardownReport": ("agent_env.tasks.teardown", "TeardownReport"),
    "StoredInstances": ("agent_env.tasks.records", "StoredInstances"),
    "failure_line": ("agent_env.tasks.records", "failure_line"),
    "find_leftovers": ("agent_env.sandbox.leftovers", "find_leftovers"),
    "remove_leftovers": ("agent_env.sandbox.leftovers", "remove"),
    "owner_label": ("agent_env.sandbox.ownership", "owner_label"),
    "OWNER_LABEL": ("agent_env.sandbox.ownership", "OWNER_LABEL"),
}

__all__ = sorted(_EXPORTS)

if TYPE_CHECKING:  # what type checkers and editors see; at run time names load lazily
    # ruff cannot read the computed __all__, so it would call these re-exports unused
    from agent_env.agents import (
        AGENT_ERROR,
        AGENT_FILE,
        DEFAULT_AGENT_NAME,
        DEFAULT_AGENT_TYPE,
        DEPLOYS,
        INFRA_ERROR,
        JUDGE_ROLE,
        PROMPTS,
        READS_REPLY,
        Agent,
        AgentDefinition,
        AgentReply,
        AgentSetup,
        AgentType,
        Usage,
        default_agent_id,
        find_reply,
    )
    from agent_env.asks import ANSWERED as ASK_ANSWERED
    from agent_env.asks import AWAITING as ASK_AWAITING
    from agent_env.asks import CANCELLED as ASK_CANCELLED
    from agent_env.asks import EXPIRED as ASK_EXPIRED
    from agent_env.asks import asks
    from agent_env.bundles.entities import stored_artifacts
    from agent_env.bundles.file_entities import (
        folder_files,
        put_artifact_bytes,
        put_env,
        put_files_entity,
        put_settings_env,
        stored_env,
        stored_folder,
    )
    from agent_env.bundles.jsonfile import MAX_FILE_BYTES as MAX_TASK_FILE_BYTES
    from agent_env.bundles.parse import FILE_DROPPED, is_inside
    from agent_env.bundles.planned import planned_folder
    from agent_env.cli.console import echo
    from agent_env.cli.deployed import get_kind as get_deployed
    from agent_env.cli.deployed import list_kind as list_deployed
    from agent_env.cli.deployed import teardown_kind as teardown_deployed
    from agent_env.cli.lazy import LazyCommand
    from agent_env.cli.params import ENTITY_ID, TTL_SECONDS, VERSION
    from agent_env.config import read_toml
    from agent_env.contributions import (
        AgentSource,
        BundleSource,
        ImportReport,
        Lazy,
        ModelProvider,
        StoreBackend,
    )
    from agent_env.deployments import (
        DEPLOYMENT_LABEL,
        Deployment,
        deployments,
        utc_now,
    )
    from agent_env.env_data import EnvDataError, LoadedEnvironments, seed_environments
    from agent_env.env_state import EnvStateChoice, EnvStateInstance
    from agent_env.env_types import (
        DEFAULT_ENV_NETWORK_POLICY,
        DEFAULT_GATEWAY_MODE,
        DEFAULT_READY_TIMEOUT,
        DEFAULT_TTL_SECONDS,
        ENV_NETWORK_POLICIES,
        EnvDeployment,
        EnvSource,
        EnvType,
        load_env_source,
        network_policy_problem,
        write_env_files,
    )
    from agent_env.episodes.episode import Episode
    from agent_env.episodes.errors import EpisodeError
    from agent_env.episodes.serving import Reward, ServedTask, ServedTasks, served_tasks
    from agent_env.episodes.serving import reward_function as episode_reward
    from agent_env.episodes.spec import EpisodeSpec
    from agent_env.episodes.task_source import BundleTasks
    from agent_env.episodes.task_source import Task as EpisodeTask
    from agent_env.episodes.turns import Turn, TurnTools
    from agent_env.episodes.turns import result_text as tool_result_text
    from agent_env.errors import ConfigError, MissingPluginError, UserError, cause
    from agent_env.evals.compare import compare as compare_run_groups
    from agent_env.evals.compare import eval_groups as eval_run_groups
    from agent_env.evals.compare import group_counters as eval_group_counters
    from agent_env.evals.compare import leaderboard as eval_leaderboard
    from agent_env.evals.compare import pass_curve as eval_pass_curve
    from agent_env.evals.compare import render_board as render_leaderboard
    from agent_env.evals.passk import pass_at_k
    from agent_env.evals.stats import buckets as eval_buckets
    from agent_env.evals.stats import group_version as eval_group_version
    from agent_env.evals.stats import merged_hist as eval_histogram
    from agent_env.hookspecs import hookimpl
    from agent_env.images.hermetic import PROTOCOL_DISTRIBUTION
    from agent_env.images.plan import (
        BUILD_DIGEST_LABEL,
        BUILDER,
        BUILDER_LABEL,
        PROTOCOL_LABEL,
        SOURCE_DIGEST_LABEL,
        BuildPlan,
        from_refs,
        official_name,
        plan_build,
        write_build_tar,
    )
    from agent_env.images.plan import slugify as image_slug
    from agent_env.logs import get_logger
    from agent_env.models import chat, model_problem, model_settings, upstream_key
    from agent_env.plugins.discovery import ACTIVE
    from agent_env.plugins.reporting import missing as missing_contribution
    from agent_env.reviews import APPROVED as REVIEW_APPROVED
    from agent_env.reviews import REJECTED as REVIEW_REJECTED
    from agent_env.reviews import reviews
    from agent_env.runners import RunnerContext
    from agent_env.runners.local import LocalRunner
    from agent_env.runs import check_sandbox_chain, run_tasks
    from agent_env.runtime import current
    from agent_env.sandbox.base import (
        DEFAULT_MEMORY_MB,
        CommittedImage,
        ContainerSpec,
        ExecResult,
        Healthcheck,
        PathOutsideSandbox,
        Sandbox,
        SandboxError,
        SandboxProvider,
        SandboxSpec,
        SandboxUnsupported,
        VolumeMount,
        build_with_progress,
        shell_argv,
        side_by_side,
    )
    from agent_env.sandbox.chain import option_chain, split_chain
    from agent_env.sandbox.cloud import (
        create_without_leaks,
        delete_with_retries,
        missing_sdk,
        timed_argv,
        timed_result,
    )
    from agent_env.sandbox.docker_host import DockerHostSandbox, hermetic_context
    from agent_env.sandbox.leftovers import find_leftovers
    from agent_env.sandbox.leftovers import remove as remove_leftovers
    from agent_env.sandbox.loop_client import LoopClient
    from agent_env.sandbox.ownership import OWNER_LABEL, owner_label, ownership_labels
    from agent_env.scratch import owned_scratch
    from agent_env.settings import build as build_settings
    from agent_env.stores import query
    from agent_env.stores.base import (
        MAX_VERSION,
        DocumentStore,
        DuplicateKeyError,
        ImageStore,
        InvalidObjectKey,
        InvalidQuery,
        InvalidUpdate,
        ObjectExists,
        ObjectMeta,
        ObjectNotFound,
        ObjectStore,
        PostPolicy,
        RegistryAuth,
        SecretStore,
        StoreError,
        UnsupportedOperation,
        validate_key,
    )
    from agent_env.stores.secrets import bundle_value
    from agent_env.tasks.artifacts import (
        CLI,
        SKILL_FILE,
        ArtifactContent,
        ArtifactFile,
        CliSpec,
        MemoryArtifacts,
    )
    from agent_env.tasks.context import TaskContext
    from agent_env.tasks.engine import TaskResult, step_of
    from agent_env.tasks.plan import TaskSpec
    from agent_env.tasks.records import StoredInstances, failure_line
    from agent_env.tasks.sandboxes import choose_provider, create_in_chain, open_provider
    from agent_env.tasks.scores import AGGREGATORS, ScoreRow, mean_score, rows_from_results
    from agent_env.tasks.session import RunRequest
    from agent_env.tasks.steps import (
        ChoiceProblem,
        InfraError,
        PreflightView,
        RunChoices,
        Step,
        StepError,
        exec_for_step,
    )
    from agent_env.tasks.teardown import TeardownReport


def __getattr__(name: str) -> Any:
    found = _EXPORTS.get(name)
    if found is None:
        raise AttributeError(f"module 'agent_env.api' has no attribute {name!r}")
    module_name, attribute = found
    module = importlib.import_module(module_name)
    value = module if attribute is None else getattr(module, attribute)
    globals()[name] = value  # later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    return __all__
