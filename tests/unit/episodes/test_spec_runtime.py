"""An EpisodeSpec carries its runtime: its episodes use that config whatever is current."""

from __future__ import annotations

from pathlib import Path

from agent_env.runtime import Runtime, current
from agent_env.task import EpisodeSpec, Task
from agent_env.tasks.records import StoredInstances

STEPS = [
    {"id": "box", "type": "deploy_sandbox", "sandbox_name": "work", "sandbox_type": "local"},
    {"id": "agent", "type": "deploy_agent", "agent_name": "alice", "sandbox_name": "work"},
    {"id": "ask", "type": "prompt_agent", "agent_name": "alice", "prompt": "Say hi."},
    {"id": "reply", "type": "agent_prompt_response_verifier", "prompt_id": "ask",
     "criteria": [{"type": "response_contains", "needles": ["hi"]}]},
]


async def test_two_specs_with_their_own_runtimes_keep_their_records_apart(
    tmp_path: Path,
) -> None:
    one, two = Runtime(), Runtime()
    one.configure(state={"root": str(tmp_path / "one")})
    two.configure(state={"root": str(tmp_path / "two")})
    specs = [EpisodeSpec.from_task(Task.from_steps("tasks/greet", STEPS), runtime=rt)
             for rt in (one, two)]
    ids = []
    for spec in specs:
        episode = await spec.start()
        turn = await episode.next_turn()
        assert turn is not None
        await turn.end(response="hi")
        assert await episode.result() == {"reply": 1.0}
        ids.append(episode.id)
        await spec.close()
    for rt, episode_id, other in ((one, ids[0], ids[1]), (two, ids[1], ids[0])):
        records = StoredInstances(rt.store("document"))
        assert records.get(episode_id) is not None and records.get(other) is None
        assert (Path(rt.config.state_root) / "sandboxes").is_dir()  # the local sandbox's home
    assert current() not in (one, two)
    assert not (Path(current().config.state_root) / "sandboxes").exists()
