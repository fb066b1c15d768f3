"""The MCP server's tools (docs/mcp.md): ``ask_user``, ``notify_user``, ``list_parked``,
``resume_parked`` and ``cancel_parked``, each acting through a ``layby.Client`` with the identity
of the caller's token (stdio: the environment's, as the CLI; HTTP: the request's bearer token).

Input schemas are generated from the typed contracts (``layby_contracts.tools``,
``layby_contracts.http.notifications``); arguments are decoded into those Structs before anything
leaves the process, so an unknown argument is an MCP invalid-params error naming it. Answers are
returned, never logged (a sensitive one included).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import anyio
import mcp_types as types
import msgspec
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError

from layby.logs import get_logger
from layby.sdk import AnswerDetails, Client, SecretValue
from layby_contracts.channels import ChannelDeliveryError
from layby_contracts.commands import Explicit, Listed, ListParked, Refused, Visit, Visited, VisitStatus
from layby_contracts.errors import InteractionTimeoutError, LaybyError, Transient
from layby_contracts.http.notifications import NotifyRequest
from layby_contracts.refusals import from_refused
from layby_contracts.tools import AskArgs, CancelParkedArgs, ListParkedArgs, ResumeParkedArgs

log = get_logger("layby.mcp")
PROGRESS_SECONDS = 10.0
"""How often a waiting ``ask_user`` reports progress (the first report is at once)."""
POLL_SECONDS = 0.05
ClientFor = Callable[[ServerRequestContext[Any, Any]], Awaitable[Client]]


def input_schema(struct: type[msgspec.Struct]) -> dict[str, Any]:
    """A Struct's JSON schema with the Struct itself at the top (MCP wants an object schema
    there), its other definitions kept under ``$defs``."""
    schema = msgspec.json.schema(struct)
    defs: dict[str, Any] = dict(schema.get("$defs", {}))
    top = dict(defs.pop(struct.__name__))
    top.pop("title", None)
    if defs:
        top["$defs"] = defs
    return top


TOOLS: dict[str, tuple[type[msgspec.Struct], str]] = {
    "ask_user": (
        AskArgs,
        "Ask a person a question and wait for the answer (or the timeout). Reports progress while "
        "it waits; cancelling the call withdraws the question.",
    ),
    "notify_user": (
        NotifyRequest,
        "Send a one-way notification to a person: recorded to their feed, or sent on a channel.",
    ),
    "list_parked": (ListParkedArgs, "List the entries parked on the subject of a run."),
    "resume_parked": (
        ResumeParkedArgs,
        "Resume a parked caller ask with a payload (or take a waiting outcome) and return the "
        "chain's next outcome.",
    ),
    "cancel_parked": (CancelParkedArgs, "Cancel parked entries and every run linked above them."),
}


def tool_list() -> list[types.Tool]:
    return [
        types.Tool(name=name, description=description, input_schema=input_schema(struct))
        for name, (struct, description) in TOOLS.items()
    ]


def decode_args(name: str, arguments: dict[str, Any] | None) -> Any:
    """The call's arguments as the tool's Struct; a mismatch (an unknown argument included) is an
    invalid-params error naming it."""
    struct = TOOLS[name][0]
    try:
        return msgspec.convert(arguments or {}, struct)
    except msgspec.ValidationError as exc:
        raise MCPError(types.INVALID_PARAMS, f"invalid arguments to {name}: {exc}") from None


def _result(value: Any, text: str | None = None) -> types.CallToolResult:
    builtins = msgspec.to_builtins(value)
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text or msgspec.json.encode(builtins).decode())],
        structured_content=builtins,
    )


def _error(message: str, **details: Any) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=message)],
        structured_content={"error": message, **{k: v for k, v in details.items() if v is not None}},
        is_error=True,
    )


def _refusal(exc: LaybyError) -> types.CallToolResult:
    return _error(str(exc), kind=type(exc).__name__, field=getattr(exc, "field", None))


class LaybyTools:
    """The tools over one way of finding the caller's client (``client_for``)."""

    def __init__(
        self, client_for: ClientFor, *, default_timeout: float, progress_seconds: float = PROGRESS_SECONDS
    ) -> None:
        self._client_for = client_for
        self._default_timeout = default_timeout
        self._progress_seconds = progress_seconds

    def server(self) -> Server[Any]:
        return Server(
            "layby",
            instructions="Ask people questions and notify them through Layby (docs/mcp.md).",
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
        )

    async def _list_tools(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tool_list())

    async def _call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        if params.name not in TOOLS:
            raise MCPError(types.INVALID_PARAMS, f"unknown tool {params.name!r}")
        args = decode_args(params.name, params.arguments)
        client = await self._client_for(ctx)
        try:
            match args:
                case AskArgs():
                    return await self.ask_user(ctx, client, args)
                case NotifyRequest():
                    return await self.notify_user(client, args)
                case ListParkedArgs():
                    return await self.list_parked(client, args)
                case ResumeParkedArgs():
                    return await self.resume_parked(client, args)
                case CancelParkedArgs():
                    return await self.cancel_parked(client, args)
        except LaybyError as exc:
            return _refusal(exc)
        except ChannelDeliveryError as exc:
            return _error(str(exc), kind="ChannelDeliveryError")
        raise MCPError(types.INTERNAL_ERROR, f"no handler for {params.name!r}")  # pragma: no cover

    async def ask_user(
        self, ctx: ServerRequestContext[Any, Any], client: Client, args: AskArgs
    ) -> types.CallToolResult:
        """Ask through the SDK in a task of its own; report progress while it waits. A cancelled
        call (``notifications/cancelled``) cancels that task, and the SDK withdraws the question
        before the cancellation completes."""
        kwargs: dict[str, Any] = msgspec.to_builtins(args)
        question = kwargs.pop("question")
        kwargs["mode"] = "sync"
        kwargs["details"] = True
        budget = args.timeout if args.timeout is not None else self._default_timeout
        deadline = datetime.now(UTC) + timedelta(seconds=budget)
        started = time.monotonic()
        task = asyncio.create_task(client.ask_user(question, **kwargs))
        try:
            while True:
                await ctx.session.report_progress(
                    time.monotonic() - started, budget, "waiting for a person to answer"
                )
                done, _ = await asyncio.wait({task}, timeout=self._progress_seconds)
                if done:
                    break
        except BaseException:
            # The client cancelled the call: withdraw the question, whatever cancels us again.
            with anyio.CancelScope(shield=True):
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
            raise
        try:
            details: AnswerDetails = task.result()
        except InteractionTimeoutError as exc:
            return _error(
                f"no answer before the deadline {deadline.isoformat(timespec='seconds')} "
                f"({budget:g}s): {exc}",
                deadline=deadline.isoformat(),
                interaction_id=exc.interaction_id,
            )
        answer = details.answer.reveal() if isinstance(details.answer, SecretValue) else details.answer
        structured = {"answer": answer, "answered_by": details.answered_by}
        if details.params is not None:
            structured["params"] = details.params
        text = answer if isinstance(answer, str) else msgspec.json.encode(answer).decode()
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=text)], structured_content=structured
        )

    async def notify_user(self, client: Client, args: NotifyRequest) -> types.CallToolResult:
        if args.sender_identity is not None:
            return _error(
                "sender_identity is not accepted: the sender is the token's identity", field="sender_identity"
            )
        kwargs: dict[str, Any] = msgspec.to_builtins(args)
        kwargs.pop("sender_identity", None)
        message = kwargs.pop("message")
        notified = await client.notify_user(message, **kwargs)
        return _result(msgspec.structs.asdict(notified))

    async def list_parked(self, client: Client, args: ListParkedArgs) -> types.CallToolResult:
        reply = await client.request_door(ListParked(token=client.token, run_id=args.run_id))
        listed = _expect(reply, Listed)
        return _result({"subject": listed.subject, "entries": listed.entries})

    async def _visit(self, client: Client, visit_id: str, run_id: str, explicit: Explicit) -> Visited:
        reply = await client.request_door(
            Visit(token=client.token, visit_id=visit_id, run_id=run_id, explicit=explicit, kind="tool")
        )
        return _expect(reply, Visited)

    async def resume_parked(self, client: Client, args: ResumeParkedArgs) -> types.CallToolResult:
        visit_id = str(uuid.uuid4())
        if args.payload is msgspec.UNSET:
            took = await self._visit(client, visit_id, args.run_id, Explicit(takes=[args.id]))
            return _result(took.result.taken[0])
        visited = await self._visit(
            client, visit_id, args.run_id, Explicit(resumes=[{"id": args.id, "payload": args.payload}])
        )
        result = visited.result
        deadline = time.monotonic() + args.wait
        while result.outcome is None and time.monotonic() < deadline:
            await asyncio.sleep(POLL_SECONDS)
            reply = await client.request_door(VisitStatus(token=client.token, visit_id=visit_id))
            if isinstance(reply, Visited):
                result = reply.result
        if result.outcome is None:
            return _result({"id": args.id, "status": "running"})
        outcome = result.outcome
        if outcome.status == "parked":
            return _result({"id": args.id, **msgspec.to_builtins(outcome)})
        # The caller receives the outcome inline: take it, so it does not also wait on the subject
        # (as layby.resume_parked does inside a flow).
        took = await self._visit(client, str(uuid.uuid4()), args.run_id, Explicit(takes=[args.id]))
        taken = msgspec.to_builtins(took.result.taken[0])
        if taken.get("status") == "failed":
            return _error(f"entry {args.id} failed: {taken.get('error') or ''}", **taken)
        return _result(taken)

    async def cancel_parked(self, client: Client, args: CancelParkedArgs) -> types.CallToolResult:
        visited = await self._visit(client, str(uuid.uuid4()), args.run_id, Explicit(cancels=args.ids))
        return _result({"cancelled": list(visited.result.cancelled)})


T = TypeVar("T")


def _expect(reply: Any, kind: type[T]) -> T:
    if isinstance(reply, Refused):
        raise from_refused(reply)
    if not isinstance(reply, kind):
        raise Transient(f"unexpected reply from the ask service: {type(reply).__name__}")
    return reply
