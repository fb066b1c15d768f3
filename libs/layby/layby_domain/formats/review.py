"""``review``: a proposed action (a tool call) that a person accepts, edits, rejects or answers
in words; what was accepted is bound to the exact arguments by their hash (docs/review.md).

The ask carries ``action`` (``name``, ``arguments`` as a JSON object, an optional JSON ``schema``
the arguments and any edit of them must match, a ``description``) and the allowed ``decisions``.
The answer is the decision:

- ``{"decision": "accept", "arguments_sha256": H}``: ``H`` is the proposal's hash (the pending
  question shows it); any other hash is refused with 409, nothing is recorded;
- ``{"decision": "edit", "arguments": {...}, "arguments_sha256": H}``: the new arguments, checked
  against the schema, decided on the proposal whose hash is ``H`` (409 otherwise);
- ``{"decision": "reject", "reason": "..."}`` (the reason is optional);
- ``{"decision": "respond", "text": "..."}``.

The recorded answer names the decision, the arguments to run (the proposal's on accept, the new
ones on edit) with their own hash, and the reason or the text.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from layby_contracts.errors import BadInput, Conflict
from layby_contracts.formats import DECISIONS, FormatPayload, ReviewPayload
from layby_domain.formats._base import AskInputs, Format
from layby_domain.formats.form import check_schema, schema_mismatch

ACTION_NAME_MAX_CHARS = 200
DESCRIPTION_MAX_CHARS = 4000
REASON_MAX_CHARS = 4000
ARGUMENTS_SHOWN_MAX_CHARS = 3000
"""How much of the arguments a chat message shows (the callback page shows them whole)."""
DEFAULT_DECISIONS = ["accept", "edit", "reject"]
ACTION_KEYS = frozenset({"name", "arguments", "schema", "description"})
ANSWER_KEYS = {
    "accept": frozenset({"decision", "arguments_sha256"}),
    "edit": frozenset({"decision", "arguments", "arguments_sha256"}),
    "reject": frozenset({"decision", "reason"}),
    "respond": frozenset({"decision", "text"}),
}
STALE = "the decision names arguments other than the proposal's (arguments_sha256 does not match)"
LABELS = {"accept": "Accept", "reject": "Reject"}
"""The decisions a chat channel offers as buttons (an edit needs the callback page, a response
a typed reply)."""


def canonical_json(value: Any) -> bytes:
    """The canonical JSON of a value: keys sorted, no whitespace, UTF-8 unescaped, no NaN."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode()


def arguments_sha256(arguments: Any) -> str:
    """The lowercase hex SHA-256 of the arguments' canonical JSON (docs/review.md#the-hash)."""
    return hashlib.sha256(canonical_json(arguments)).hexdigest()


class Review(Format):
    name = "review"
    page = "review"
    control = "choice"
    reviews_an_action = True

    def check_ask(self, ask: AskInputs) -> dict[str, Any] | None:
        self._refuse_options(ask.options)
        self._refuse_form_extras(ask.data, ask.pages)
        self._refuse_schema(ask.schema)
        self._refuse_verifier(ask.verifier)
        action = check_action(ask.action)
        return {"action": action, "decisions": check_decisions(ask.decisions)}

    def vetoes(self, answer: Any) -> bool:
        return isinstance(answer, dict) and answer.get("decision") == "reject"

    def agreement(self, answer: Any) -> Any:
        if isinstance(answer, dict) and answer.get("decision") in ("accept", "edit"):
            return {"decision": answer["decision"], "arguments_sha256": answer.get("arguments_sha256")}
        return {"decision": answer.get("decision")} if isinstance(answer, dict) else answer

    def check_answer(self, payload: FormatPayload, answer: Any) -> Any:
        assert isinstance(payload, ReviewPayload)
        if not isinstance(answer, dict):
            raise BadInput('answer must be an object with a "decision"')
        decision = answer.get("decision")
        if decision not in DECISIONS:
            raise BadInput(f"decision must be one of {list(DECISIONS)!r}", field="decision")
        if decision not in payload.decisions:
            raise BadInput(
                f"this question does not allow {decision!r}; allowed: {list(payload.decisions)!r}",
                field="decision",
            )
        extra = sorted(set(answer) - ANSWER_KEYS[decision])
        if extra:
            raise BadInput(f"{extra[0]} is not part of an {decision!r} decision", field=extra[0])
        if decision == "reject":
            reason = answer.get("reason")
            if reason is not None:
                _check_text(reason, "reason", REASON_MAX_CHARS, blank_ok=True)
            return {"decision": "reject", **({"reason": reason} if reason else {})}
        if decision == "respond":
            text = answer.get("text")
            _check_text(text, "text", REASON_MAX_CHARS)
            return {"decision": "respond", "text": text}
        said = answer.get("arguments_sha256")
        if not isinstance(said, str) or not said:
            raise BadInput(
                f"an {decision!r} decision must name the proposal's arguments_sha256",
                field="arguments_sha256",
            )
        proposed = arguments_sha256(payload.action.arguments)
        if said.lower() != proposed:
            raise Conflict(STALE, field="arguments_sha256")
        arguments: Any = payload.action.arguments
        if decision == "edit":
            arguments = answer.get("arguments")
            if not isinstance(arguments, dict):
                raise BadInput("an edit's arguments must be a JSON object", field="arguments")
            _check_arguments(arguments, payload.action.schema, "arguments")
        return {
            "decision": decision,
            "arguments": arguments,
            "arguments_sha256": proposed if decision == "accept" else arguments_sha256(arguments),
            "proposal_sha256": proposed,
        }

    def frame(self, payload: dict[str, Any] | None) -> dict[str, Any]:
        """The pending question shows the proposal's hash, which an accept or an edit names."""
        action = (payload or {}).get("action") or {}
        return {
            "format_payload": {
                **(payload or {}),
                "arguments_sha256": arguments_sha256(action.get("arguments", {})),
            }
        }

    def choices(self, payload: FormatPayload) -> list[str] | None:
        assert isinstance(payload, ReviewPayload)
        return [LABELS[d] for d in payload.decisions if d in LABELS]

    def delivery(self, payload: FormatPayload) -> dict[str, Any]:
        return {"options": self.choices(payload)}

    def chat_text(self, question: str, payload: FormatPayload, callback_url: str) -> str:
        assert isinstance(payload, ReviewPayload)
        action = payload.action
        shown = json.dumps(action.arguments, indent=2, ensure_ascii=False, sort_keys=True)
        if len(shown) > ARGUMENTS_SHOWN_MAX_CHARS:
            shown = shown[:ARGUMENTS_SHOWN_MAX_CHARS] + "\n… (the whole arguments on the review page)"
        lines = [question, "", f"Action: {action.name}"]
        if action.description:
            lines.append(action.description)
        lines += ["Arguments:", shown]
        if "edit" in payload.decisions:
            lines += ["", f"To edit the arguments: {callback_url}"]
        return "\n".join(lines)

    def reply_answer(self, payload: FormatPayload, kind: str, index: int | None, value: Any) -> Any:
        """A tap of Accept or Reject is that decision on the arguments the message showed; a
        typed ``accept``/``reject <reason>`` the same; other text is a response where allowed."""
        assert isinstance(payload, ReviewPayload)
        if kind == "tap":
            choices = self.choices(payload) or []
            if index is None or not 0 <= index < len(choices):
                raise BadInput("the tapped control is not one of this question's options")
            return self._decided(payload, choices[index].lower(), None)
        if kind == "typed" and isinstance(value, str):
            word, _, rest = value.strip().partition(" ")
            word = word.strip(".!:,").lower()
            if word in {"accept", "approve", "yes"}:
                return self._decided(payload, "accept", None)
            if word in {"reject", "deny", "no"}:
                return self._decided(payload, "reject", rest.strip() or None)
            if "respond" in payload.decisions:
                return {"decision": "respond", "text": value.strip()}
            raise BadInput("reply accept or reject (edits are made on the review page)")
        raise BadInput(f"a {kind!r} reply does not answer a review")

    def _decided(self, payload: ReviewPayload, decision: str, reason: str | None) -> dict[str, Any]:
        if decision == "accept":
            return {"decision": "accept", "arguments_sha256": arguments_sha256(payload.action.arguments)}
        return {"decision": "reject", **({"reason": reason} if reason else {})}


def check_action(action: object) -> dict[str, Any]:
    """The proposed action: a non-blank ``name``, ``arguments`` as a JSON object that matches the
    optional ``schema`` (itself a valid JSON schema), an optional ``description``."""
    if action is None:
        raise BadInput("answer_format 'review' requires an action", field="action")
    if not isinstance(action, dict):
        raise BadInput("action must be an object with a name and arguments", field="action")
    unknown = sorted(set(action) - ACTION_KEYS)
    if unknown:
        raise BadInput(f"action.{unknown[0]} is not a field of an action", field=f"action.{unknown[0]}")
    name = action.get("name")
    _check_text(name, "action.name", ACTION_NAME_MAX_CHARS)
    arguments = action.get("arguments", {})
    if not isinstance(arguments, dict):
        raise BadInput("action.arguments must be a JSON object", field="action.arguments")
    try:
        canonical_json(arguments)
    except (TypeError, ValueError) as exc:
        raise BadInput(f"action.arguments must be plain JSON: {exc}", field="action.arguments") from None
    schema = action.get("schema")
    if schema is not None:
        schema = check_schema(schema, "action.schema")
        _check_arguments(arguments, schema, "action.arguments")
    description = action.get("description")
    if description is not None:
        _check_text(description, "action.description", DESCRIPTION_MAX_CHARS)
    checked: dict[str, Any] = {"name": name, "arguments": arguments}
    if schema is not None:
        checked["schema"] = schema
    if description is not None:
        checked["description"] = description
    return checked


def check_decisions(decisions: object) -> list[str]:
    """The allowed decisions: a non-empty list of distinct known ones (default: accept, edit,
    reject); ``edit`` needs an action whose arguments can be edited (always: a JSON object)."""
    if decisions is None:
        return list(DEFAULT_DECISIONS)
    if not isinstance(decisions, list | tuple) or not decisions:
        raise BadInput(f"decisions must be a non-empty list of {list(DECISIONS)!r}", field="decisions")
    seen: list[str] = []
    for index, decision in enumerate(decisions):
        if decision not in DECISIONS:
            raise BadInput(
                f"decisions[{index}] must be one of {list(DECISIONS)!r}", field=f"decisions[{index}]"
            )
        if decision in seen:
            raise BadInput(f"decisions[{index}] repeats {decision!r}", field=f"decisions[{index}]")
        seen.append(decision)
    return [d for d in DECISIONS if d in seen]


def _check_text(value: object, field: str, limit: int, *, blank_ok: bool = False) -> None:
    if not isinstance(value, str) or (not blank_ok and not value.strip()):
        raise BadInput(f"{field} must be a non-blank string", field=field)
    if len(value) > limit:
        raise BadInput(f"{field} is longer than {limit} characters", field=field)


def _check_arguments(arguments: dict[str, Any], schema: dict[str, Any] | None, field: str) -> None:
    """Arguments against the action's schema (the failing path named below ``field``)."""
    import jsonschema
    import referencing.exceptions

    if schema is None:
        return
    try:
        mismatch = schema_mismatch(schema, arguments)
    except RecursionError:
        raise BadInput(f"{field} is nested too deeply", field=field) from None
    except (jsonschema.SchemaError, referencing.exceptions.Unresolvable) as exc:
        raise BadInput(f"action.schema is invalid: {exc}", field="action.schema") from None
    if mismatch is not None:
        where, message = mismatch
        path = f"{field}.{where}" if where else field
        raise BadInput(f"{path} does not match the action's schema: {message}", field=path)


REVIEW = Review()
