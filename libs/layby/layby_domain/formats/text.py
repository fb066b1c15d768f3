"""``text``: a free-text answer; ``options`` are suggested replies that constrain nothing."""

from __future__ import annotations

from typing import Any

from layby_contracts.errors import BadInput
from layby_contracts.formats import FormatPayload, TextPayload
from layby_domain.formats._base import AskInputs, Format, check_options


class Text(Format):
    name = "text"

    def check_ask(self, ask: AskInputs) -> dict[str, Any] | None:
        options = check_options(ask.options) if ask.options is not None else None
        self._refuse_form_extras(ask.data, ask.pages)
        self._refuse_schema(ask.schema)
        self._refuse_verifier(ask.verifier)
        return {"options": options} if options is not None else None

    def check_answer(self, payload: FormatPayload, answer: Any) -> Any:
        if not isinstance(answer, str):
            raise BadInput("answer must be a string")
        return answer

    def choices(self, payload: FormatPayload) -> list[str] | None:
        assert isinstance(payload, TextPayload)
        return payload.options

    def typed_reply(self, payload: FormatPayload, text: str) -> Any:
        return text

    def delivery(self, payload: FormatPayload) -> dict[str, Any]:
        assert isinstance(payload, TextPayload)
        return {"suggested_replies": payload.options}


TEXT = Text()
