"""``peer_agents``: let deployed agents message each other (peer-agents/v1).

Why: a multi-agent task (a planner and a coder, a solver that consults a colleague) needs each
agent to know who it may message and how to reach them. The step gives each source agent its
peers through ``/ext/peer-agents`` (its card must list peer-agents/v1: the SDK serves it, the
model-agent enables it); the agent then has a ``peer_send_message`` tool, and each message is a
tool call in its trajectory and a prompt in the peer's. A peer is reached inside the sandbox at
its front (``agent-<name>-front``), with its bearer token, so both must run in one sandbox
(deploy them with the same env, or the same ``sandbox_name``). The reference's key:
``peerings``: ``[{source_agent_name, peer_agent_names}]``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs

from agent_env.api import PreflightView, Step, StepError

if TYPE_CHECKING:
    from agent_env.api import TaskContext


@attrs.define(kw_only=True)
class PeerAgents(Step):
    """Give each source agent its peers (see the module)."""

    type = "peer_agents"
    example = {
        'id': 'peers',
        'type': 'peer_agents',
        'peerings': [{'source_agent_name': 'planner', 'peer_agent_names': ['coder']}],
    }

    peerings: list[dict[str, Any]]

    def check(self, view: PreflightView) -> list[str]:
        problems = super().check(view)
        if not self.peerings:
            problems.append("peerings must list at least one {source_agent_name, "
                            "peer_agent_names}")
        sources: set[str] = set()
        for index, peering in enumerate(self.peerings):
            source, peers = peering.get("source_agent_name"), peering.get("peer_agent_names")
            if not isinstance(source, str) or not source or not isinstance(peers, list) \
                    or not peers or not all(isinstance(p, str) and p for p in peers):
                problems.append(f"peerings[{index}] needs source_agent_name and a non-empty "
                                "peer_agent_names list")
                continue
            if source in sources:
                problems.append(f"peerings[{index}]: source '{source}' is listed twice")
            sources.add(source)
            if source in peers:
                problems.append(f"peerings[{index}]: '{source}' lists itself as a peer")
        return problems

    async def run(self, ctx: TaskContext) -> None:
        import aiohttp

        from .a2a_type import A2aAgent, post_ok
        from .object_forms import card_extension

        def a2a(name: str, what: str) -> A2aAgent:
            agent = ctx.agent(name)
            if not isinstance(agent, A2aAgent):
                raise StepError(f"{what} '{name}' is not an A2A agent deployed by this run, so "
                                "it cannot be peered")
            return agent

        done = []
        for peering in self.peerings:
            source = a2a(peering["source_agent_name"], "source")
            ext = card_extension(source.card, "peer-agents")
            if ext is None:
                raise StepError(f"agent '{source.name}' does not serve peer-agents/v1 (its card "
                                "does not list it)")
            entries = []
            for name in peering["peer_agent_names"]:
                peer = a2a(name, "peer")
                if peer.sandbox is not source.sandbox:
                    raise StepError(f"peer '{name}' runs in another sandbox than '{source.name}'"
                                    ": deploy both with the same env or sandbox_name")
                entries.append({"name": name, "url": peer.peer_url, "headers": {
                                    "Authorization": f"Bearer {peer.token}"},
                                "description": peer.card.get("description")})
            endpoint = str((ext.get("params") or {}).get("endpoint") or "/ext/peer-agents")
            async with aiohttp.ClientSession(headers=source.auth_headers) as http:
                await post_ok(http, f"{source.url}{endpoint}", {"peers": entries}, source.name)
            done.append({"source_agent_name": source.name,
                         "peer_agent_names": list(peering["peer_agent_names"])})
        ctx.outputs[self.id] = {"peerings": done}
