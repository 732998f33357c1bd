"""``env website put`` and ``env website-browser put``: what they store, and their refusals
(the deploys themselves: tests/e2e/agents/test_website_todo.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cli_runner import cli

from agent_env.runtime import current

TODO = (Path(__file__).resolve().parents[3]
        / "plugins/agents/agentenv_agents/bundles/website-todo/envs/todo")


def stored(env_id: str) -> dict[str, Any]:
    record = current().versioned_store.get("envs", env_id, None)
    assert record is not None
    return record.body


def test_put_stores_both_build_contexts_as_one_website_env(state_root: Path,
                                                           capsys: Any) -> None:
    code, out, err = cli(capsys, "env", "website", "put", "--id", "shop",
                         "--backend-dockerfile", str(TODO / "backend/Dockerfile"),
                         "--frontend-docker-context", str(TODO / "frontend"),
                         "--environment-name", "todo")
    assert (code, out, err) == (0, "env shop: v1 (new)\n", "")
    body = stored("shop")
    assert body["type"] == "website" and body["environment_name"] == "todo"
    assert sorted(body["files"]) == [
        "backend/Dockerfile", "backend/app.py", "frontend/Dockerfile",
        "frontend/index.html", "frontend/server.py"]
    # the same contexts again: the same version
    assert cli(capsys, "env", "website", "put", "--id", "shop",
               "--backend-dockerfile", str(TODO / "backend/Dockerfile"),
               "--frontend-docker-context", str(TODO / "frontend"),
               "--environment-name", "todo")[1] == "env shop: v1, unchanged\n"


def test_put_with_images_stores_their_references(state_root: Path, capsys: Any) -> None:
    assert cli(capsys, "env", "website", "put", "--id", "shop", "--backend-image-ref",
               "registry.example/shop-be:1", "--frontend-image-ref",
               "registry.example/shop-fe:1")[0] == 0
    assert stored("shop")["settings"] == {"backend_image": "registry.example/shop-be:1",
                                          "frontend_image": "registry.example/shop-fe:1"}


def test_put_refusals_name_the_fix(state_root: Path, capsys: Any, tmp_path: Path) -> None:
    code, _, err = cli(capsys, "env", "website", "put", "--id", "shop",
                       "--backend-dockerfile", str(TODO / "backend/Dockerfile"))
    assert code == 1
    assert "the frontend is missing: give --frontend-dockerfile" in err
    code, _, err = cli(capsys, "env", "website", "put", "--id", "shop",
                       "--backend-docker-context", str(tmp_path),
                       "--frontend-image-ref", "fe:1")
    assert code == 1 and "it has no Dockerfile (give --backend-dockerfile)" in err
    code, _, err = cli(capsys, "env", "website", "put", "--id", "shop",
                       "--backend-image-ref", "be:1", "--backend-dockerfile",
                       str(TODO / "backend/Dockerfile"), "--frontend-image-ref", "fe:1")
    assert code == 1 and "--backend-image-ref runs an image as it is" in err


def test_website_browser_put_stores_the_shipped_browser(state_root: Path,
                                                        capsys: Any) -> None:
    code, out, _ = cli(capsys, "env", "website-browser", "put")
    assert (code, out) == (0, "env website-browser: v1 (new)\n")
    body = stored("website-browser")
    assert body["type"] == "mcp_server" and body["environment_name"] == "website-browser"
    assert sorted(body["files"]) == ["Dockerfile", "entrypoint.py"]


def test_env_lists_the_website_commands(state_root: Path, capsys: Any) -> None:
    _, out, _ = cli(capsys, "env", "--help")
    assert "website " in out and "website-browser" in out
