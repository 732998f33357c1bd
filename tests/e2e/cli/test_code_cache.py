"""Commands keep the code attrs and cattrs generate in the user's cache folder, and the next
command uses it (:mod:`agent_env.cli.code_cache`)."""

from __future__ import annotations

import re


def test_a_run_again_compiles_nothing_and_runs_the_same(agent_env) -> None:
    cache_home = agent_env.root / "cache"
    agent_env.env["XDG_CACHE_HOME"] = str(cache_home)
    first = agent_env("run", "hello")  # stores the bundle's entities: the "new" path
    assert first.returncode == 0, first.stdout + first.stderr
    second = agent_env("run", "hello")  # finds them unchanged: may build a class or two more
    assert second.returncode == 0, second.stdout + second.stderr
    [cache] = (cache_home / "agent-env").glob("generated-code-*.marshal")
    written = cache.stat().st_mtime_ns
    third = agent_env("run", "hello")
    assert third.returncode == 0, third.stdout + third.stderr
    assert cache.stat().st_mtime_ns == written  # every snippet found: nothing new to write

    def steady(out: str) -> str:
        return re.sub(r"hello-\w+|v\d+(, unchanged| \(new\))?|\d+\.\d+s", "#", out)

    assert steady(third.stdout) == steady(second.stdout)


def test_an_unwritable_cache_folder_changes_nothing(agent_env) -> None:
    blocked = agent_env.root / "not-a-folder"
    blocked.write_text("a file where the cache folder would go")
    agent_env.env["XDG_CACHE_HOME"] = str(blocked)
    done = agent_env("run", "hello")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stderr == ""
