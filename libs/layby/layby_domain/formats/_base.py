"""What every answer format provides, and the ask-time checks formats share."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from layby_contracts.errors import BadInput
from layby_contracts.formats import FormatPayload, payload_of
from layby_domain.verifiers import check_binding

Control = Literal["free_text", "choice", "yes_no", "fields", "link"]
"""How a chat channel offers a format's answer: a free-text reply (with any suggested replies as
taps), a choice among options, a yes and a no, a set of fields to fill in, or a link to follow."""
Page = Literal["form", "confirm", "awaiting", "review"]
"""The public callback page of a ticketed question: its form, a confirm button, a page that
says the question waits for an answer through its channel, or a proposed action to review."""

OPTION_MAX_CHARS = 1000
OPTIONS_MAX_ITEMS = 200


@dataclass(frozen=True, slots=True)
class AskInputs:
    """The format-dependent arguments of an ask, as the caller gave them (unchecked)."""

    options: object = None
    schema: object = None
    data: object = None
    pages: object = None
    verifier: object = None
    link_url: object = None
    channel: object = None
    action: object = None
    decisions: object = None


class Format:
    """One answer format. Subclasses override what differs; every check raises ``BadInput``
    naming the field, in the documented order (options, schema and form extras, verifier)."""

    name: str = ""
    page: Page = "awaiting"
    answered_at_the_door: bool = True
    """False when only the question's callback may answer it (the answer door refuses)."""
    ticketed: bool = False
    """Answered through its own callback URL even when no channel delivers it: the ask carries a
    ``link`` the person visits and the hash of the question's ticket, and the callback's JSON is
    the answer (``check_callback_answer``). Any format delivered by a channel has a ticket too
    (the delivery mints it); this says whether one is needed without a channel."""
    delivered_as_form: bool = False
    reviews_an_action: bool = False
    """Takes ``action`` and ``decisions`` (every other format refuses them)."""
    """A channel that delivers it must render a form (``supports_form_delivery``), and its schema
    must keep to the channel-renderable subset (docs/channels.md#forms)."""

    def check_ask(self, ask: AskInputs) -> dict[str, Any] | None:
        """The ``format_payload`` to record, once every format-dependent argument passed."""
        raise NotImplementedError

    def check_answer(self, payload: FormatPayload, answer: Any) -> Any:
        """The typed value of a valid answer; raises ``BadInput`` with the door's message."""
        raise NotImplementedError

    def vetoes(self, answer: Any) -> bool:
        """Whether a checked answer is a no that decides a quorum at once when the question's
        routing lets a veto (docs/routing.md#quorum): a confirm's false, a review's reject."""
        return False

    def agreement(self, answer: Any) -> Any:
        """What two votes must share to agree (docs/routing.md#quorum): the whole answer, unless
        a format says which part decides (a review's decision and hash, not its wording)."""
        return answer

    def check_callback_answer(self, payload: FormatPayload, answer: dict[str, Any]) -> dict[str, Any]:
        """The answer an outside system's callback carries, checked (ticketed formats only)."""
        raise BadInput(f"{self.name!r} questions are not answered by an outside system's callback")

    def needs_link(self, channel: object) -> bool:
        """Whether an ask of this format carries a link and its ticket's hash: a ticketed format
        that no channel delivers (a channel's delivery mints the ticket and hands the callback URL
        on itself)."""
        return self.ticketed and channel is None

    def has_ticket(self, channel: object) -> bool:
        """Whether a recorded question of this format can be reached through a callback ticket."""
        return self.ticketed or channel is not None

    def chat_text(self, question: str, payload: FormatPayload, callback_url: str) -> str:
        """The text a chat channel shows for the question (the question itself, unless the
        format has more to show than its controls can; ``callback_url``: its page)."""
        return question

    def frame(self, payload: dict[str, Any] | None) -> dict[str, Any]:
        """What a client sees of the format in the pending-question item."""
        return {"format_payload": payload}

    def delivery(self, payload: FormatPayload) -> dict[str, Any]:
        """The format's fields of a channel delivery."""
        return {}

    def choices(self, payload: FormatPayload) -> list[str] | None:
        """The options a chat channel shows as controls (a select's options, a text question's
        suggested replies); a tap of one stands for its text."""
        return None

    def typed_reply(self, payload: FormatPayload, text: str) -> Any:
        """The answer a reply typed on a chat channel stands for (before ``check_answer``)."""
        surface = {"fields": "form", "link": "link"}.get(self.control, "buttons")
        raise BadInput(f"this question is answered with its {surface}, not a typed reply")

    control: Control = "free_text"
    """How a chat channel offers the answer (docs/channels.md#capability-matrix)."""

    def reply_answer(self, payload: FormatPayload, kind: str, index: int | None, value: Any) -> Any:
        """The answer a chat reply stands for (docs/channels.md#replies): a tap is its option's
        text, a yes/no tap its bool, a typed reply what ``typed_reply`` makes of it, a submitted
        form its values. Raises ``BadInput`` when the reply does not fit the question."""
        if kind == "typed":
            if not isinstance(value, str):
                raise BadInput("the reply has no text")
            return self.typed_reply(payload, value)
        if kind == "tap":
            choices = self.choices(payload)
            if not choices or index is None or not 0 <= index < len(choices):
                raise BadInput("the tapped control is not one of this question's options")
            return choices[index]
        if kind == "yes_no":
            if self.control != "yes_no" or not isinstance(value, bool):
                raise BadInput("this question is not answered yes or no")
            return value
        if kind == "submitted":
            if not self.delivered_as_form:
                raise BadInput("this question has no form")
            return value
        raise BadInput(f"a {kind!r} reply does not answer a question")

    def empty_callback_answer(self) -> Any:
        """The answer an empty callback POST stands for (None: an empty body is refused)."""
        return None

    def typed(self, format_payload: dict[str, Any] | None) -> FormatPayload:
        return payload_of(self.name, format_payload)

    # -- the checks formats share ------------------------------------------------------------

    def _refuse_options(self, options: object) -> None:
        if options is not None:
            raise BadInput(
                f"options are only for 'select' (the choices) or 'text' (suggested replies), "
                f"not for {self.name!r}",
                field="options",
            )

    def _refuse_form_extras(self, data: object, pages: object) -> None:
        if data is not None or pages is not None:
            raise BadInput(
                f"{'data' if data is not None else 'pages'} is only for 'form', not for {self.name!r}",
                field="data" if data is not None else "pages",
            )

    def _refuse_schema(self, schema: object) -> None:
        if schema is not None:
            raise BadInput(f"schema is only for 'form' or 'external', not for {self.name!r}", field="schema")

    @staticmethod
    def _refuse_verifier(verifier: object) -> None:
        if verifier is not None:
            raise BadInput("verifier is only for 'external' questions", field="verifier")


def check_options(options: object) -> list[str]:
    """A non-empty list of distinct, non-blank strings within the caps."""
    if not isinstance(options, list | tuple) or not options:
        raise BadInput("options must be a non-empty list of strings", field="options")
    if len(options) > OPTIONS_MAX_ITEMS:
        raise BadInput(f"options must hold at most {OPTIONS_MAX_ITEMS} items", field="options")
    seen: set[str] = set()
    for index, option in enumerate(options):
        if not isinstance(option, str) or not option.strip():
            raise BadInput(f"options[{index}] must be a non-blank string", field=f"options[{index}]")
        if len(option) > OPTION_MAX_CHARS:
            raise BadInput(
                f"options[{index}] is longer than {OPTION_MAX_CHARS} characters", field=f"options[{index}]"
            )
        if option in seen:
            raise BadInput(f"options[{index}] repeats {option!r}", field=f"options[{index}]")
        seen.add(option)
    return list(options)


__all__ = ["AskInputs", "Control", "Format", "Page", "check_binding", "check_options"]
