"""triggers/v1 on an agent: a deterministic script for a user-simulating agent.

Why: a conversation eval wants the simulated user to say the same thing at the same point
every run ("push back at turn 2", "say thanks and stop once the answer mentions 42"), which a
model playing the user does not guarantee. The harness registers triggers
(``POST /ext/triggers``) and, before each user turn, asks ``POST /ext/triggers/decide`` with
the turn number, the agent's last message and the env triggers' statuses; what fires speaks
for the user (``say``) or ends the conversation (``end``). When nothing fires the harness
falls back to the user's own model.

A trigger is ``{id?, once?, when, actions}`` (the reference's keys). ``when``:

* ``{type: "step", turn, cmp?: "eq"|"gte"}``: the user's turn number (the opening prompt is
  turn 1, the first answer to the agent turn 2);
* ``{type: "conversational", where: {message: {regex|equals|exists}}}``: the agent's last
  message;
* ``{type: "env_trigger", env_id, trigger_id, status?: "fired"}``: an env trigger's status;
* ``{type: "all"|"any", of: [...]}``.

``actions``: ``{type: "say", text}`` and ``{type: "end"}``. A ``once`` trigger (the default)
fires once per conversation (``context_id``); a turn number not above the last one decided
starts the conversation again.
"""

from __future__ import annotations

import itertools
import secrets
from collections import deque
from typing import Any

from ..errors import AgentEnvError
from ..triggers import holds, predicate_problem

TRIGGERS_PATH = "/ext/triggers"
DECIDE_PATH = "/ext/triggers/decide"
WHEN_TYPES = ("step", "conversational", "env_trigger", "all", "any")
MAX_TRIGGERS = 256
MAX_CONTEXTS = 1024
MAX_LOG = 1024
MAX_TEXT = 8192
MAX_MESSAGE = 200_000


def bad_request(message: str) -> AgentEnvError:
    return AgentEnvError("invalid_params", message, status=400)


def _predicate(pred: Any, where: str) -> dict[str, Any]:
    problem = predicate_problem(pred)
    if problem:
        raise bad_request(f"{where} {problem}")
    return dict(pred)


class AgentTriggers:
    """The registered triggers, what fired in each conversation, and the firing log."""

    def __init__(self) -> None:
        self.triggers: dict[str, dict[str, Any]] = {}
        self._fired: dict[str, set[str]] = {}
        self._last_turn: dict[str, int] = {}
        self.log: deque[dict[str, Any]] = deque(maxlen=MAX_LOG)
        self._seq = itertools.count(1)

    def register(self, body: Any) -> dict[str, Any]:
        triggers = body.get("triggers") if isinstance(body, dict) else None
        if not isinstance(triggers, list) or not triggers:
            raise bad_request("triggers must be a non-empty list")
        batch: dict[str, dict[str, Any]] = {}
        for index, raw in enumerate(triggers):
            spec = self._normalise(raw, index)
            if spec["id"] in batch:
                raise bad_request(f"trigger {spec['id']!r} is given twice")
            old = self.triggers.get(spec["id"])
            if old is not None and old != spec:
                raise bad_request(f"trigger {spec['id']!r} is already registered with another "
                                  "spec (use a new id)")
            batch[spec["id"]] = spec
        if len(set(self.triggers) | set(batch)) > MAX_TRIGGERS:
            raise bad_request(f"at most {MAX_TRIGGERS} triggers can be registered")
        self.triggers.update(batch)
        self._emit("registered", added=list(batch))
        return {"ok": True, "added": list(batch), "all": list(self.triggers)}

    def _normalise(self, raw: Any, index: int) -> dict[str, Any]:
        if not isinstance(raw, dict):
            raise bad_request(f"triggers[{index}] must be an object")
        tid = raw.get("id") or f"trg_{secrets.token_hex(6)}"
        if not isinstance(tid, str):
            raise bad_request(f"triggers[{index}].id must be a string")
        unknown = sorted(set(raw) - {"id", "once", "when", "actions", "description"})
        if unknown:
            raise bad_request(f"trigger {tid!r}: unknown keys {unknown}")
        once = raw.get("once", True)
        if not isinstance(once, bool):
            raise bad_request(f"trigger {tid!r}: once must be true or false")
        actions = raw.get("actions")
        if not isinstance(actions, list) or not actions:
            raise bad_request(f"trigger {tid!r}: actions must be a non-empty list")
        normal = []
        for action in actions:
            kind = action.get("type") if isinstance(action, dict) else None
            if kind == "say":
                text = action.get("text")
                if not isinstance(text, str) or not text or len(text) > MAX_TEXT:
                    raise bad_request(f"trigger {tid!r}: say.text must be a non-empty string "
                                      f"of at most {MAX_TEXT} characters")
                normal.append({"type": "say", "text": text})
            elif kind == "end":
                normal.append({"type": "end"})
            else:
                raise bad_request(f"trigger {tid!r}: action type must be 'say' or 'end'")
        return {"id": tid, "once": once, "when": self._when(raw.get("when"), tid),
                "actions": normal}

    def _when(self, when: Any, tid: str) -> dict[str, Any]:
        kind = when.get("type") if isinstance(when, dict) else None
        where = f"trigger {tid!r}: when"
        if kind == "step":
            turn, cmp = when.get("turn", 1), when.get("cmp", "eq")
            if isinstance(turn, bool) or not isinstance(turn, int) or turn < 1:
                raise bad_request(f"{where}.turn must be a positive integer")
            if cmp not in ("eq", "gte"):
                raise bad_request(f"{where}.cmp must be 'eq' or 'gte'")
            return {"type": kind, "turn": turn, "cmp": cmp}
        if kind == "conversational":
            preds = when.get("where")
            if not isinstance(preds, dict) or set(preds) != {"message"}:
                raise bad_request(f"{where}.where must be {{\"message\": <predicate>}}")
            return {"type": kind, "where": {"message": _predicate(preds["message"],
                                                                  f"{where}.where.message")}}
        if kind == "env_trigger":
            env_id, trigger_id = when.get("env_id"), when.get("trigger_id")
            status = when.get("status", "fired")
            if not all(isinstance(v, str) and v for v in (env_id, trigger_id, status)):
                raise bad_request(f"{where}: env_trigger needs env_id and trigger_id (and a "
                                  "status, 'fired' unless given)")
            return {"type": kind, "env_id": env_id, "trigger_id": trigger_id, "status": status}
        if kind in ("all", "any"):
            of = when.get("of")
            if not isinstance(of, list) or not of:
                raise bad_request(f"{where}.of must be a non-empty list")
            return {"type": kind, "of": [self._when(child, tid) for child in of]}
        raise bad_request(f"{where}.type must be one of {', '.join(WHEN_TYPES)}")

    def decide(self, body: Any) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise bad_request("body must be a JSON object")
        turn, message = body.get("turn"), body.get("solver_message", "")
        context = body.get("context_id", "default")
        given = body.get("env_triggers")
        envs: dict[str, Any] = given if isinstance(given, dict) else {}
        if isinstance(turn, bool) or not isinstance(turn, int) or turn < 1:
            raise bad_request("turn must be a positive integer")
        if not isinstance(message, str) or len(message) > MAX_MESSAGE:
            raise bad_request(f"solver_message must be a string of at most {MAX_MESSAGE} "
                              "characters")
        if not isinstance(context, str) or not context:
            raise bad_request("context_id must be a non-empty string")
        if context not in self._fired and len(self._fired) >= MAX_CONTEXTS:
            raise bad_request(f"at most {MAX_CONTEXTS} conversations are kept")
        if turn <= self._last_turn.get(context, 0):  # the conversation started again
            self._fired[context] = set()
            self._emit("reset", context_id=context, turn=turn)
        fired_before = self._fired.setdefault(context, set())
        texts: list[str] = []
        fired: list[str] = []
        done = False
        for tid, spec in self.triggers.items():
            if spec["once"] and tid in fired_before:
                continue
            if self._matches(spec["when"], turn, message, envs):
                fired.append(tid)
                for action in spec["actions"]:
                    if action["type"] == "say":
                        texts.append(action["text"])
                    else:
                        done = True
        self._last_turn[context] = turn
        fired_before.update(fired)
        for tid in fired:
            self._emit("fired", trigger_id=tid, turn=turn, context_id=context)
        parts = [{"kind": "text", "text": "\n".join(texts)}] if texts else []
        return {"parts": parts, "done": done, "fired": fired}

    def _matches(self, when: dict[str, Any], turn: int, message: str,
                 envs: dict[str, Any]) -> bool:
        kind = when["type"]
        if kind == "step":
            return turn == when["turn"] if when["cmp"] == "eq" else turn >= when["turn"]
        if kind == "conversational":
            return holds(when["where"]["message"], message)
        if kind == "env_trigger":
            statuses = envs.get(when["env_id"])
            return isinstance(statuses, dict) and \
                statuses.get(when["trigger_id"]) == when["status"]
        results = (self._matches(child, turn, message, envs) for child in when["of"])
        return all(results) if kind == "all" else any(results)

    def state(self) -> dict[str, Any]:
        return {"triggers": [{"id": tid, "when_type": spec["when"]["type"], "once": spec["once"]}
                             for tid, spec in self.triggers.items()],
                "firing_log": list(self.log)}

    def _emit(self, kind: str, **fields: Any) -> None:
        self.log.append({"seq": next(self._seq), "kind": kind, **fields})

    @staticmethod
    def card_entry(uri: str) -> dict[str, Any]:
        return {"uri": uri,
                "description": "Deterministic turns for a simulated user: register triggers, "
                               "then ask each turn what fires.",
                "params": {"endpoint": TRIGGERS_PATH, "methods": {
                    "register": {"method": "POST", "endpoint": TRIGGERS_PATH,
                                 "request": {"triggers": "array"}},
                    "decide": {"method": "POST", "endpoint": DECIDE_PATH,
                               "request": {"turn": "integer", "solver_message": "string",
                                           "context_id": "string", "env_triggers": "object"},
                               "response": {"parts": "array", "done": "boolean",
                                            "fired": "array"}},
                    "state": {"method": "GET", "endpoint": TRIGGERS_PATH,
                              "response": {"triggers": "array", "firing_log": "array"}}}}}
