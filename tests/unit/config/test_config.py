"""Config: finding the file, precedence, references and the errors a user sees."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from agent_env import config as cfg
from agent_env import runtime
from agent_env.errors import ConfigError


@pytest.fixture(autouse=True)
def _clean(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    for name in list(os.environ):
        if name.startswith("AGENT_ENV_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    runtime.reset()
    yield
    runtime.reset()


def write_config(folder: Path, text: str) -> Path:
    path = folder / ".agentenv" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_no_file_means_local_defaults(tmp_path: Path) -> None:
    config = cfg.load_config()
    assert config.path is None
    assert config.store("object").backend == "filesystem"
    assert config.sources["stores"] == "default"


def test_the_file_is_found_by_walking_up(tmp_path: Path, monkeypatch) -> None:
    path = write_config(tmp_path, '[stores]\nobject = "s3"\n')
    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True)
    monkeypatch.chdir(deep)
    config = cfg.load_config()
    assert config.path == path
    assert config.store("object").backend == "s3"
    assert config.store("document").backend == "sqlite"  # absent keys keep their default


def test_precedence_default_file_env_code(tmp_path: Path, monkeypatch) -> None:
    write_config(tmp_path, '[stores]\nobject = "from-file"\ndocument = "from-file"\n')
    monkeypatch.setenv("AGENT_ENV_OBJECT_STORE", "from-env")
    monkeypatch.setenv("AGENT_ENV_DOCUMENT_STORE", "from-env")
    runtime.configure(stores={"document": "from-code"})
    config = runtime.current().config
    assert config.store("object").backend == "from-env"
    assert config.store("document").backend == "from-code"
    assert config.store("secret").backend == "local"
    assert "AGENT_ENV_OBJECT_STORE" in config.sources["stores"]
    assert "configure()" in config.sources["stores"]


def test_store_settings_table(tmp_path: Path) -> None:
    write_config(tmp_path, '[stores.object]\nbackend = "s3"\nbucket = "b1"\n')
    choice = cfg.load_config().store("object")
    assert (choice.backend, choice.settings) == ("s3", {"bucket": "b1"})


@pytest.mark.parametrize(("table", "backend", "settings"), [
    ('impl = "agent_env.store.object_store.s3_object_store:S3ObjectStore"\n'
     '[stores.object.config]\nbucket = "b1"\nregion = "eu-west-1"\nshare_credentials = false\n',
     "s3", {"bucket": "b1", "region": "eu-west-1"}),
    ('impl = "agent_env.store.object_store:LocalFilesystemObjectStore"\n',
     "filesystem", {}),
])
def test_the_references_own_store_classes_are_our_backends(
        tmp_path: Path, table: str, backend: str, settings: dict[str, str]) -> None:
    write_config(tmp_path, "[stores.object]\n" + table)
    choice = cfg.load_config().store("object")
    assert (choice.backend, choice.settings, choice.impl) == (backend, settings, None)


def test_reference_keys_are_renamed_or_refused(tmp_path: Path) -> None:
    write_config(tmp_path, '[stores.document]\n'
                           'impl = "agent_env.store.document_store:DynamoDbDocumentStore"\n'
                           '[stores.document.config]\ntable_prefix = "rl_"\n'
                           '[stores.image]\nimpl = "agent_env.store.image_store:EcrImageStore"\n'
                           '[stores.image.config]\n'
                           'registry_host = "123456789012.dkr.ecr.us-east-1.amazonaws.com"\n'
                           '[stores.secret]\n'
                           'impl = "agent_env.store.secret_store:AwsSecretsManagerSecretStore"\n'
                           '[stores.secret.config]\nsecret_name = "s"\nregion = "r"\n'
                           'min_refresh_interval = 60\n')
    config = cfg.load_config()
    assert config.store("document").settings == {"table": "rl_agentenv-documents"}
    assert config.store("image").settings == {"registry_id": "123456789012",
                                              "region": "us-east-1"}
    with pytest.raises(ConfigError) as info:
        config.store("secret")
    assert str(info.value) == (
        "[stores.secret].config: min_refresh_interval = 60 has no counterpart in the "
        "'secretsmanager' secret store here; leave it out")


@pytest.mark.parametrize(("table", "message"), [
    ('impl = "agent_env.store.document_store:MongoDocumentStore"\n',
     "no MongoDB document store is installed here"),
    ('impl = "agent_env.store.object_store:LocalFilesystemObjectStore"\n',
     'is a object store, not a document store'),
    ('impl = "agent_env.store.document_store:LocalSqliteDocumentStore"\n'
     '[stores.document.config]\nfile = "x"\n',
     "'file' is not a key of the reference's LocalSqliteDocumentStore (it takes: path)"),
    ('impl = "agent_env.store.document_store:LocalSqliteDocumentStore"\npath = "x"\n',
     "the store's settings go in [stores.document].config, not beside it (path)"),
    ('impl = "SqliteStore"\n', "impl must be a 'module:Class' string"),
])
def test_a_reference_table_that_cannot_work_says_why(tmp_path: Path, table: str,
                                                     message: str) -> None:
    write_config(tmp_path, "[stores.document]\n" + table)
    with pytest.raises(ConfigError, match=re.escape(message)):
        cfg.load_config().store("document")


def test_an_outside_impl_class_is_built_with_its_config(tmp_path: Path) -> None:
    """A class of one's own (here our filesystem store, by its module path) is imported, checked
    against the kind's interface and built with ``[stores.X.config]``."""
    from agent_env import runtime
    from agent_env.stores.filesystem import FilesystemObjectStore

    write_config(tmp_path, '[stores.object]\n'
                           'impl = "agent_env.stores.filesystem:FilesystemObjectStore"\n'
                           f'[stores.object.config]\npath = "{tmp_path / "objects"}"\n')
    runtime.reset()
    store = runtime.current().object_store
    assert isinstance(store, FilesystemObjectStore)
    store.put("k", b"v")
    assert (tmp_path / "objects").is_dir()


@pytest.mark.parametrize(("impl", "message"), [
    ("my_team.stores:Nope", '[stores.object] impl = "my_team.stores:Nope" cannot be imported '
                            "(No module named 'my_team')"),
    ("agent_env.stores.filesystem:FilesystemObjectStore", "is not a DocumentStore"),
])
def test_an_outside_impl_that_is_not_a_store_names_the_class_and_section(
        tmp_path: Path, impl: str, message: str) -> None:
    from agent_env import runtime

    kind = "object" if "Nope" in impl else "document"
    write_config(tmp_path, f'[stores.{kind}]\nimpl = "{impl}"\n')
    runtime.reset()
    with pytest.raises(ConfigError, match=re.escape(message)):
        runtime.current().store(kind)


def test_agent_env_config_must_exist(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("AGENT_ENV_CONFIG", str(tmp_path / "nope.toml"))
    with pytest.raises(ConfigError, match=r"AGENT_ENV_CONFIG names .*nope.toml, which does not"):
        cfg.load_config()


def test_malformed_toml_names_file_and_line(tmp_path: Path) -> None:
    path = write_config(tmp_path, '[stores]\nobject = "s3"\nbroken = \n')
    with pytest.raises(ConfigError) as info:
        cfg.load_config()
    assert str(info.value).startswith(f"{path}:3: invalid TOML")


def test_a_section_that_is_not_a_table_is_an_error(tmp_path: Path) -> None:
    write_config(tmp_path, 'stores = "s3"\n')
    with pytest.raises(ConfigError, match=r"\[stores\] must be a table"):
        cfg.load_config()


def test_unknown_keys_and_sections_warn_by_name(tmp_path: Path) -> None:
    write_config(tmp_path, '[stores]\nobjekt = "s3"\n[nonsense]\nx = 1\n')
    warnings = cfg.load_config().warnings
    assert any("unknown key 'objekt' in [stores]" in w for w in warnings)
    assert any("unknown section [nonsense]" in w for w in warnings)


def test_env_references_with_and_without_default(tmp_path: Path, monkeypatch) -> None:
    write_config(
        tmp_path,
        '[model]\nbase_url = "env:MODEL_URL"\napi_key = "env:MODEL_KEY?none"\n',
    )
    monkeypatch.setenv("MODEL_URL", "http://127.0.0.1:9")
    model = cfg.load_config().section("model")
    assert model == {"base_url": "http://127.0.0.1:9", "api_key": "none"}


def test_an_unresolved_env_reference_is_a_clear_error(tmp_path: Path) -> None:
    write_config(tmp_path, '[model]\napi_key = "env:NOT_SET_ANYWHERE"\n')
    with pytest.raises(ConfigError) as info:
        cfg.load_config()
    message = str(info.value)
    assert "model.api_key" in message and "export NOT_SET_ANYWHERE=" in message
    assert "\n" not in message


def test_secret_references_resolve_through_a_lookup(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("POINTER", "secret:real?x")
    resolved = cfg.resolve_references(
        {"a": ["env:POINTER"], "b": "secret:tok"},
        secrets={"real": "s3cr3t", "tok": "t"}.get,
    )
    assert resolved == {"a": ["s3cr3t"], "b": "t"}


def test_mask_hides_secret_values_but_not_references() -> None:
    shown = cfg.mask({"model": {"api_key": "sk-123", "base_url": "u"},
                      "p": {"token": "env:TOK"}, "stores": {"secret": "local"}})
    assert shown["model"] == {"api_key": "****", "base_url": "u"}
    assert shown["p"]["token"] == "env:TOK"
    assert shown["stores"]["secret"] == "local"


def test_state_root_is_private(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    root = cfg.load_config().state_root
    assert root == tmp_path / "xdg" / "agent-env"
    assert (root.stat().st_mode & 0o777) == 0o700


def test_sandbox_chain_and_provider_settings(tmp_path: Path) -> None:
    write_config(
        tmp_path,
        '[sandbox]\ndefault = "tensorlake, docker"\n'
        '[sandbox.providers.tensorlake.config]\napi_key = "k"\n',
    )
    config = cfg.load_config()
    assert config.sandbox_chain() == ["tensorlake", "docker"]
    assert config.provider_settings("tensorlake") == {"api_key": "k"}


SECRET_SECTIONS = '''
[stores.secret]
backend = "local"
use_environment = false
values = { OPENAI_KEY = "sk-from-the-store" }
[model]
base_url = "http://127.0.0.1:9"
api_key = "secret:OPENAI_KEY"
[plugins.agentenv-framework-example]
token = "secret:OPENAI_KEY"
[sandbox]
default = "local"
[sandbox.providers.tenki.config]
api_key = "secret:NOT_STORED"
'''


def test_every_section_resolves_secret_references_through_the_secret_store(
        tmp_path: Path, monkeypatch) -> None:
    """Issue 31, class 5: ``[model] api_key = "secret:..."`` reached the model gateway as the
    literal text; every section now takes the stores' resolution path."""
    monkeypatch.setenv("AGENT_ENV_STATE_DIR", str(tmp_path / "state"))
    write_config(tmp_path, SECRET_SECTIONS)
    config = runtime.current().config
    assert config.section("model")["api_key"] == "sk-from-the-store"
    assert config.plugin_tables()["agentenv-framework-example"] == {"token": "sk-from-the-store"}
    assert config.sandbox_chain() == ["local"]  # an unused provider's secret is not looked up
    with pytest.raises(ConfigError) as info:
        config.provider_settings("tenki")
    message = str(info.value)
    assert "sandbox.providers.tenki.config.api_key" in message and "'NOT_STORED'" in message
    assert "\n" not in message


def test_a_missing_model_secret_is_one_line_naming_it(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("AGENT_ENV_STATE_DIR", str(tmp_path / "state"))
    write_config(tmp_path, '[model]\napi_key = "secret:NOPE_KEY"\n')
    with pytest.raises(ConfigError) as info:
        runtime.current().config.section("model")
    assert str(info.value).startswith("model.api_key: 'secret:NOPE_KEY' is not set (add "
                                      "'NOPE_KEY' to the secret store")


def test_litellm_variables_are_the_model_upstream_when_nothing_else_names_one(
        tmp_path: Path) -> None:
    """The host's ``LITELLM_BASE_URL``/``LITELLM_API_KEY`` (what a reference user already has
    set) fill ``[model]`` only where the file and ``AGENT_ENV_*`` leave it unset."""
    litellm = {"LITELLM_BASE_URL": "http://proxy:4000/v1", "LITELLM_API_KEY": "sk-lite"}
    model = cfg.load_config(path=None, environ=litellm).section("model")
    assert (model["base_url"], model["api_key"]) == ("http://proxy:4000/v1", "sk-lite")
    ours = cfg.load_config(path=None, environ={
        **litellm, "AGENT_ENV_MODEL_BASE_URL": "http://ours/v1"}).section("model")
    assert (ours["base_url"], ours["api_key"]) == ("http://ours/v1", "sk-lite")
    path = write_config(tmp_path, '[model]\nbase_url = "http://file/v1"\n')
    filed = cfg.load_config(path=path, environ=litellm).section("model")
    assert filed["base_url"] == "http://file/v1"


def test_the_references_settings_not_read_here_say_why(tmp_path: Path) -> None:
    write_config(tmp_path, '[conversations]\ndefault_human_a2a_url = "http://h"\n'
                           '[state]\nproviders = {}\n[artifacts]\ntype_aliases = {}\n')
    warnings = "\n".join(cfg.load_config().warnings)
    assert "conversations" not in warnings  # read: the user of a conversation over A2A
    assert "[state] providers is not read: env state types come from env types here " \
        "(local_postgres" in warnings
    assert "[artifacts] is not read: artifact types come from plugins here" in warnings
