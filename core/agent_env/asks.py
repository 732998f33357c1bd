"""Asks: a prompt waiting for a person who plays an agent (``deploy_human_agent``).

Why records in the document store, as reviews are: the run waits in one process, and the
person answers from another (the explorer's conversation page, or ``agent-env task answer``),
maybe on another machine sharing the stores. An ask is ``awaiting`` from the moment the human
agent is prompted until someone answers it (``answered``, once: a second answer is refused),
its prompt's timeout passes (``expired``) or its run stops (``cancelled``).

While it waits, the person may call the env's tools. The deployment's token never leaves the
run (it is never stored): a call is a record the person adds (``requested``), which the run
carries out through the env's gateway, as the human agent's role, and completes with the result
(``done``). Each change is one conditional update, so the answering side and the run never
overwrite each other.
"""

from __future__ import annotations

import datetime as dt
import secrets
from typing import Any

import attrs

from agent_env.stores.records import Records

COLLECTION = "human_asks"
CALLS = "human_ask_calls"
AWAITING, ANSWERED, EXPIRED, CANCELLED = "awaiting", "answered", "expired", "cancelled"
REQUESTED, DONE = "requested", "done"


@attrs.frozen
class Ask:
    """One prompt to a person playing ``agent_name`` in run ``instance_id``."""

    ask_id: str
    instance_id: str
    agent_name: str
    prompt: str
    state: str
    created_at: str
    #: The env tools the person may call: ``{name, description, input_schema}`` each.
    tools: list[dict[str, Any]] = attrs.field(factory=list)
    answer: str | None = None
    answered_by: str | None = None
    answered_at: str | None = None

    def to_json(self) -> dict[str, Any]:
        return attrs.asdict(self)


@attrs.frozen
class AskCall:
    """A tool call a person asked for while answering, and (once done) its result."""

    ask_id: str
    call_id: str
    name: str
    arguments: dict[str, Any]
    state: str
    created_at: str
    requested_by: str | None = None
    result: str | None = None
    is_error: bool | None = None

    def to_json(self) -> dict[str, Any]:
        return attrs.asdict(self)


class Asks(Records[Ask]):
    collection = COLLECTION

    @staticmethod
    def key(record: Ask) -> str:
        return record.ask_id

    @staticmethod
    def load(document: dict[str, Any]) -> Ask:
        fields = {f.name for f in attrs.fields(Ask)}
        return Ask(**{k: v for k, v in document.items() if k in fields})

    def open(self, instance_id: str, agent_name: str, prompt: str,
             tools: list[dict[str, Any]]) -> Ask:
        ask = Ask(f"{instance_id}.{agent_name}.{secrets.token_hex(3)}", instance_id,
                  agent_name, prompt, AWAITING, _now(), tools)
        self.add(ask)
        return ask

    def close(self, ask_id: str, state: str, *, answer: str | None = None,
              by: str | None = None) -> Ask:
        """End an awaiting ask (answered, expired, cancelled); ValueError when there is no
        such ask or it has ended already."""
        changes = {"state": state, "answered_at": _now(), "answered_by": by,
                   "answer": answer}
        if not self.documents.update(self.collection, {"_id": ask_id, "state": AWAITING},
                                     {"$set": changes}):
            found = self.get(ask_id)
            if found is None:
                raise ValueError(f"no ask '{ask_id}' (agent-env task answer --list shows those "
                                 "awaiting)")
            raise ValueError(f"ask '{ask_id}' was already {found.state}"
                             + (f" by {found.answered_by}" if found.answered_by else ""))
        found = self.get(ask_id)
        assert found is not None
        return found

    def answer(self, ask_id: str, text: str, by: str) -> Ask:
        """A person's answer (ValueError as :meth:`close`)."""
        return self.close(ask_id, ANSWERED, answer=text, by=by)

    def awaiting(self) -> list[Ask]:
        return self.all({"state": AWAITING})

    # -- tool calls ----------------------------------------------------------------------------
    def request_call(self, ask_id: str, name: str, arguments: dict[str, Any],
                     by: str | None) -> AskCall:
        """Ask the run to call ``name``; ValueError when the ask does not await or has no
        such tool."""
        ask = self.get(ask_id)
        if ask is None or ask.state != AWAITING:
            raise ValueError(f"ask '{ask_id}' " + ("does not exist" if ask is None else
                                                   f"was already {ask.state}"))
        known = [t.get("name") for t in ask.tools]
        if name not in known:
            raise ValueError(f"tool '{name}' is not one this ask offers (it offers: "
                             f"{', '.join(map(str, known)) or 'none'})")
        call = AskCall(ask_id, secrets.token_hex(4), name, dict(arguments), REQUESTED, _now(),
                       by)
        self.documents.insert(CALLS, {**call.to_json(), "_id": f"{ask_id}:{call.call_id}"})
        return call

    def calls(self, ask_id: str, state: str | None = None) -> list[AskCall]:
        query: dict[str, Any] = {"ask_id": ask_id, **({"state": state} if state else {})}
        found = [_call(d) for d in self.documents.query(CALLS, query)]
        return sorted(found, key=lambda c: (c.created_at, c.call_id))

    def complete_call(self, call: AskCall, result: str, is_error: bool) -> None:
        self.documents.update(CALLS, {"_id": f"{call.ask_id}:{call.call_id}",
                                      "state": REQUESTED},
                              {"$set": {"state": DONE, "result": result, "is_error": is_error}})


def _call(document: dict[str, Any]) -> AskCall:
    fields = {f.name for f in attrs.fields(AskCall)}
    return AskCall(**{k: v for k, v in document.items() if k in fields})


def asks(documents: Any = None) -> Asks:
    """The asks in ``documents`` (default: the configured document store)."""
    if documents is None:
        from agent_env.runtime import current

        documents = current().document_store
    return Asks(documents)


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds")
