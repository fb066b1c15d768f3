"""``layby.ask_external``: turn a tool that builds an outside resource into an external question
(docs/asking.md#ask_external).

The wrapped tool takes a ``callback_url`` keyword and returns the URL a person visits (sync or
async). The composed tool hides ``callback_url`` and adds ``question``, ``answer_schema`` and
``timeout``; calling it asks an external question whose link is the tool, and returns the payload
the outside system delivers. A ``verifier`` comes only from the author, at wrap time — never from a
call argument. Tools that lack ``callback_url``, define one of the control names, or take
positional-only, ``*args`` or ``**kwargs`` parameters are refused when wrapped.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable
from typing import Any

from layby_contracts.errors import BadInput

CONTROL_NAMES = ("question", "answer_schema", "timeout")


def ask_external(
    tool: Callable[..., Any], *, verifier: dict[str, Any] | None = None, client: Any = None
) -> Callable[..., Awaitable[Any]]:
    """Wrap ``tool``; ``client`` (a ``layby.Client``) is used when given, else ``layby.ask_user``'s."""
    if not callable(tool):
        raise BadInput("ask_external wraps a callable tool", field="tool")
    params = inspect.signature(tool).parameters
    if "callback_url" not in params:
        raise BadInput("the wrapped tool must take a callback_url parameter", field="tool")
    for name, param in params.items():
        if name in CONTROL_NAMES:
            raise BadInput(f"the wrapped tool must not define {name!r}: ask_external adds it", field="tool")
        if param.kind in (param.POSITIONAL_ONLY, param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise BadInput(
                f"the wrapped tool's parameter {name!r} must be a named parameter "
                "(no positional-only, *args or **kwargs)",
                field="tool",
            )
    if verifier is not None:
        from layby_domain.verifiers import check_binding

        check_binding(verifier)

    @functools.wraps(tool)
    async def composed(
        question: str, *, answer_schema: Any = None, timeout: float | None = None, **tool_args: Any
    ) -> Any:
        if "callback_url" in tool_args:
            raise BadInput(
                "callback_url is supplied by ask_external, not by the caller", field="callback_url"
            )
        unknown = set(tool_args) - set(params)
        if unknown:
            raise BadInput(
                f"unknown argument {sorted(unknown)[0]!r} for the wrapped tool", field=sorted(unknown)[0]
            )
        from layby.sdk import ask_user as module_ask_user

        ask = client.ask_user if client is not None else module_ask_user

        async def link(callback_url: str) -> Any:
            result = tool(callback_url=callback_url, **tool_args)
            return await result if inspect.isawaitable(result) else result

        return await ask(
            question,
            answer_format="external",
            link=link,
            schema=answer_schema,
            timeout=timeout,
            verifier=verifier,
        )

    visible = [p for n, p in params.items() if n != "callback_url"]
    controls = [
        inspect.Parameter("question", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=str),
        inspect.Parameter("answer_schema", inspect.Parameter.KEYWORD_ONLY, default=None),
        inspect.Parameter("timeout", inspect.Parameter.KEYWORD_ONLY, default=None),
    ]
    keyword_only = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in visible]
    composed.__signature__ = inspect.Signature([controls[0], *controls[1:], *keyword_only])  # type: ignore[attr-defined]
    return composed
