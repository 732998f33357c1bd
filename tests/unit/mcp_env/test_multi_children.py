"""Which stored envs a multi env's ``mcp_server_envs`` name, for bundle ids and plain ids."""

from agentenv_mcp_env.multi import child_ids


def test_a_bundle_env_names_its_siblings_and_stored_ids_as_they_are() -> None:
    settings = {"mcp_server_envs": ["notes", "@local/other/x"]}
    assert child_ids("@local/b/office", settings) == ["@local/b/notes", "@local/other/x"]


def test_an_env_put_under_a_plain_id_names_stored_envs_by_theirs() -> None:
    # env multi put --id office --mcp-server notes: 'notes' is the stored env's id
    assert child_ids("office", {"mcp_server_envs": ["notes", "digest"]}) == ["notes", "digest"]
