"""``confirm``: yes or no; the answer is a boolean, and an empty callback POST means yes."""

from __future__ import annotations

from typing import Any

from layby_contracts.errors import BadInput
from layby_contracts.formats import FormatPayload
from layby_domain.formats._base import AskInputs, Format

YES = frozenset({"yes", "y", "true", "ok", "approve", "approved"})
NO = frozenset({"no", "n", "false", "deny", "denied", "reject"})


class Confirm(Format):
    name = "confirm"
    page = "confirm"
    control = "yes_no"

    def check_ask(self, ask: AskInputs) -> dict[str, Any] | None:
        self._refuse_options(ask.options)
        self._refuse_form_extras(ask.data, ask.pages)
        self._refuse_schema(ask.schema)
        self._refuse_verifier(ask.verifier)
        return None

    def check_answer(self, payload: FormatPayload, answer: Any) -> Any:
        if not isinstance(answer, bool):
            raise BadInput("answer must be a boolean")
        return answer

    def vetoes(self, answer: Any) -> bool:
        return answer is False

    def typed_reply(self, payload: FormatPayload, text: str) -> Any:
        word = text.strip().strip(".!").lower()
        if word in YES:
            return True
        if word in NO:
            return False
        raise BadInput("reply yes or no")

    def empty_callback_answer(self) -> Any:
        return True  # the confirm page's button posts nothing


CONFIRM = Confirm()
