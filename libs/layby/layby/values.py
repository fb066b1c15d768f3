"""What an ask returns besides the bare answer: a sensitive answer kept out of logs and reprs
(``SecretValue``), and an answer with who gave it (``AnswerDetails``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


class SecretValue:
    """The answer of a ``sensitive`` question: only ``.reveal()`` shows it
    (docs/aggregates/interaction.md#sensitive-answers)."""

    __slots__ = ("_value",)

    def __init__(self, value: Any) -> None:
        self._value = value

    def reveal(self) -> Any:
        return self._value

    def __repr__(self) -> str:
        return "SecretValue(***)"

    __str__ = __repr__

    def __reduce__(self) -> Any:
        raise TypeError("a SecretValue cannot be serialized; call .reveal() deliberately")


@dataclass(frozen=True, slots=True)
class AnswerDetails:
    """An answer with what came beside it (``ask_user(..., details=True)``): who answered, and
    the opaque ``params`` a tapped chat control carried (``{"reply_id": ...}``; transport data,
    never trusted; None for a typed or inbox answer) (docs/channels.md#enrichment)."""

    answer: Any
    answered_by: str | None = None
    params: dict[str, Any] | None = None
