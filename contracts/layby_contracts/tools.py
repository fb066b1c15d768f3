"""The arguments of Layby's agent tools (docs/mcp.md#tools): what an MCP client passes to
``ask_user``, ``list_parked``, ``resume_parked`` and ``cancel_parked``. ``notify_user`` takes the
notification door's own body (``layby_contracts.http.notifications.NotifyRequest``).

The tools' JSON schemas are generated from these Structs (``msgspec.json.schema``); unknown keys
are refused (``forbid_unknown_fields``: ``additionalProperties: false`` in the schema). ``AskArgs``
has the question's fields (``layby_contracts.question.AskFields``), as the HTTP ask door's body does.
"""

from __future__ import annotations

from typing import Any

import msgspec

from layby_contracts.question import AnswerFormat, AskFields

__all__ = ["AnswerFormat", "AskArgs", "CancelParkedArgs", "ListParkedArgs", "ResumeParkedArgs"]


class AskArgs(AskFields, frozen=True, kw_only=True):
    """A synchronous question to a person, with the arguments of ``layby.ask_user`` that travel
    as JSON (docs/asking.md): the answer ``format`` and its ``options`` or form ``schema`` (with
    ``data`` and ``pages``), display-only ``media``, the ``audience`` who may answer, the
    ``channel`` (one name or several) and its ``recipient``, the chat ``on_mismatch``,
    ``mismatch_notice`` and ``reply_ids``, an external question's ``link`` template and
    ``verifier``, the ``timeout`` in seconds, whether the answer is ``sensitive``, and the
    ``notify_url`` its outcome is POSTed to."""


class ListParkedArgs(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Every entry parked on the subject of the run ``run_id`` (docs/caller-asks.md)."""

    run_id: str


class ResumeParkedArgs(
    msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, omit_defaults=True
):
    """Resume the asking entry ``id`` on the subject of the run ``run_id`` with ``payload`` as its
    answer; without ``payload``, take that finished waiting outcome. ``wait``: seconds to wait for
    the resumed chain's next outcome before reporting ``running``."""

    run_id: str
    id: str
    payload: Any = msgspec.UNSET
    wait: float = 60.0


class CancelParkedArgs(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Whole-chain kill each named entry on the subject of the run ``run_id``."""

    run_id: str
    ids: list[str]
