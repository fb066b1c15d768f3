"""Review an action before it runs (docs/review.md): ``review`` asks a person to accept, edit,
reject or answer a proposed tool call and returns the decision as a ``Review``; ``reviewed``
wraps an async tool function so it runs only with the arguments a person accepted; and
``answer_interrupt`` answers a LangGraph ``HumanInterrupt`` through Layby.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from layby.values import AnswerDetails, SecretValue
from layby_contracts.formats import DECISIONS, Decision
from layby_domain.formats.review import arguments_sha256

if TYPE_CHECKING:
    from layby.client import Client

P = ParamSpec("P")
R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class Review:
    """A person's decision on a proposed action. ``arguments`` (accept and edit) are the ones to
    run, bound by ``arguments_sha256``; ``reason`` (reject) and ``text`` (respond) are the
    person's words; ``by`` who decided."""

    decision: Decision
    arguments: dict[str, Any] | None = None
    arguments_sha256: str | None = None
    reason: str | None = None
    text: str | None = None
    by: str | None = None

    @property
    def approved(self) -> bool:
        """Accepted as proposed, or edited (the edit is what to run)."""
        return self.decision in ("accept", "edit")


class ReviewRejectedError(Exception):
    """A reviewed action was rejected (``review.reason``) or answered in words instead
    (``review.text``): it did not run. Raised by ``reviewed`` in the caller's process only."""

    def __init__(self, review: Review) -> None:
        words = review.reason or review.text
        verb = "rejected" if review.decision == "reject" else "answered in words"
        super().__init__(f"the action was {verb}" + (f": {words}" if words else ""))
        self.review = review


def review_of(details: AnswerDetails) -> Review:
    """The ``Review`` of a recorded review answer; an accept or an edit whose arguments do not
    hash to the recorded hash is refused (the record was altered on its way)."""
    answer = details.answer.reveal() if isinstance(details.answer, SecretValue) else details.answer
    if not isinstance(answer, dict) or answer.get("decision") not in DECISIONS:
        raise ValueError(f"not a review decision: {answer!r}")
    arguments = answer.get("arguments")
    said = answer.get("arguments_sha256")
    decided = Review(
        decision=answer["decision"],
        arguments=arguments,
        arguments_sha256=said,
        reason=answer.get("reason"),
        text=answer.get("text"),
        by=details.answered_by,
    )
    if decided.approved and (not isinstance(arguments, dict) or arguments_sha256(arguments) != said):
        raise ValueError("the reviewed arguments do not match their recorded hash")
    return decided


async def review(
    name: str,
    arguments: dict[str, Any],
    *,
    question: str | None = None,
    schema: dict[str, Any] | None = None,
    description: str | None = None,
    decisions: list[str] | None = None,
    client: Client | None = None,
    **ask: Any,
) -> Review:
    """Ask a person to review the action ``name`` with ``arguments`` (a JSON object) and return
    their decision. ``schema`` checks the arguments and any edit of them; ``decisions`` are the
    allowed ones (default accept, edit, reject); ``client`` asks through that client (else as
    ``layby.ask_user`` does); ``ask`` takes the other arguments of ``ask_user`` (``timeout``,
    ``audience``, ``channel``, ``mode``…)."""
    from layby.sdk import ask_user

    asker = client.ask_user if client is not None else ask_user
    action: dict[str, Any] = {"name": name, "arguments": arguments}
    if schema is not None:
        action["schema"] = schema
    if description is not None:
        action["description"] = description
    details = await asker(
        question or f"May I run {name}?",
        answer_format="review",
        action=action,
        decisions=decisions,
        details=True,
        **ask,
    )
    return review_of(details)


def reviewed(
    *,
    name: str | None = None,
    question: str | None = None,
    schema: dict[str, Any] | None = None,
    description: str | None = None,
    decisions: list[str] | None = None,
    **ask: Any,
) -> Callable[[Callable[P, Awaitable[R]]], Callable[P, Awaitable[R]]]:
    """Decorate an async tool function: each call is reviewed first (its arguments by parameter
    name), then runs with the accepted or edited arguments; a reject or a response raises
    ``ReviewRejectedError`` and the function does not run."""

    def wrap(function: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
        signature = inspect.signature(function)
        action = name or function.__name__

        @functools.wraps(function)
        async def reviewed_call(*args: P.args, **kwargs: P.kwargs) -> R:
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            decided = await review(
                action,
                dict(bound.arguments),
                question=question,
                schema=schema,
                description=description or inspect.getdoc(function),
                decisions=decisions,
                **ask,
            )
            if not decided.approved:
                raise ReviewRejectedError(decided)
            assert decided.arguments is not None
            run: Callable[..., Awaitable[R]] = function
            return await run(**decided.arguments)

        return reviewed_call

    return wrap


LANGGRAPH_DECISIONS = {
    "allow_accept": "accept",
    "allow_edit": "edit",
    "allow_ignore": "reject",
    "allow_respond": "respond",
}
"""A LangGraph ``HumanInterrupt``'s ``config`` flags and the decisions they allow (in the order
of ``DECISIONS``)."""


async def answer_interrupt(interrupt: dict[str, Any] | list[dict[str, Any]], **ask: Any) -> Any:
    """Answer a LangGraph ``HumanInterrupt`` (or a list of them) through Layby and return its
    ``HumanResponse`` (or their list): accept → ``accept`` with the action, edit → ``edit`` with
    the edited action, reject → ``ignore``, respond → ``response`` with the text."""
    if isinstance(interrupt, list):
        return [await answer_interrupt(one, **ask) for one in interrupt]
    request = interrupt.get("action_request") or {}
    config = interrupt.get("config") or {}
    allowed = [decision for flag, decision in LANGGRAPH_DECISIONS.items() if config.get(flag)]
    decided = await review(
        str(request.get("action", "")),
        dict(request.get("args") or {}),
        description=interrupt.get("description"),
        decisions=allowed or None,
        **ask,
    )
    if decided.decision == "accept":
        return {"type": "accept", "args": {"action": request.get("action"), "args": decided.arguments}}
    if decided.decision == "edit":
        return {"type": "edit", "args": {"action": request.get("action"), "args": decided.arguments}}
    if decided.decision == "respond":
        return {"type": "response", "args": decided.text}
    return {"type": "ignore", "args": None}
