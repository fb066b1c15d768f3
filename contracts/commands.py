"""Commands: requests that a service may refuse, sent as core-NATS requests (CONVENTIONS 2).

The SDK sends ``Ask`` and ``Prune`` to the ask service; the resume service publishes ``Wake``
to a blocked asker. Commands forbid unknown fields: a typo is a refusal, never a silent default.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec


class Ask(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, tag="cmd.ask.v1"):
    """Record a question (the SDK already validated it; the ask service validates again)."""

    token: str
    interaction_id: str
    question: str
    answer_format: str = "text"
    options: list[str] | None = None
    schema: dict[str, Any] | None = None
    timeout: float | None = None
    group_id: str | None = None
    audience: str | None = None
    sensitive: bool = False
    waiter: str | None = None


class Prune(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, tag="cmd.prune.v1"):
    """Remove a pending sync question whose waiter gave up (timeout or cancellation)."""

    token: str
    interaction_id: str
    reason: Literal["timeout", "cancelled"] = "timeout"


Command = Ask | Prune
COMMAND_DECODER: msgspec.json.Decoder[Command] = msgspec.json.Decoder(Command)


class Accepted(msgspec.Struct, frozen=True, kw_only=True, tag="ok"):
    interaction_id: str
    group_id: str
    timeout_at: str


class Refused(msgspec.Struct, frozen=True, kw_only=True, tag="refused"):
    """``kind`` tells the SDK which exception to raise; ``field`` names the offending argument."""

    kind: Literal["invalid", "limit", "audience", "unauthorized", "unavailable"]
    message: str
    field: str | None = None


class PruneResult(msgspec.Struct, frozen=True, kw_only=True, tag="pruned"):
    """``outcome``: pruned now, already answered (answer attached when recorded), or gone."""

    outcome: Literal["pruned", "answered", "gone"]
    answer: Any = None
    answered_at: str | None = None
    sensitive: bool = False


Reply = Accepted | Refused | PruneResult
REPLY_DECODER: msgspec.json.Decoder[Reply] = msgspec.json.Decoder(Reply)


class Wake(msgspec.Struct, frozen=True, kw_only=True):
    """Published by the resume service to ``<ns>.wake.<id>`` when a question resolves."""

    interaction_id: str
    outcome: Literal["answered", "removed"]
    answer: Any = None
    answered_by: str | None = None
    answered_at: str | None = None
    reason: str | None = None


WAKE_DECODER: msgspec.json.Decoder[Wake] = msgspec.json.Decoder(Wake)
