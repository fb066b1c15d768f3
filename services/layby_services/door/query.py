"""The doors' query parameters, typed (docs/doors/common.md#envelope-and-errors).

Each parameter is declared once, with its type and limits, in its handler's signature: Litestar
documents it from there and converts it before the handler runs, so no value outside its type
(a NUL character PostgreSQL cannot store, a filter too long, a status that does not exist)
ever reaches the database. A refused value gets the doors' 400 ``{"error", "field"}`` with the
message of that parameter's own check (``REFUSALS``, in the order the doors check them), never
the framework's text.

Authentication comes first: the authenticated doors check the token in their router's guard
(deps.py), which runs before any parameter is converted, so a request without valid
credentials learns nothing else.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Annotated, Any

import msgspec
from litestar import Request, Response
from litestar.exceptions import ValidationException
from litestar.params import HeaderParameter, QueryParameter

from layby_contracts.errors import BadInput, LaybyError
from layby_contracts.http import RUN_STATUSES
from layby_contracts.limits import ANSWER_FORMATS, PAGE_MAX, PAGE_SIZE_DEFAULT, PAGE_SIZE_MAX
from layby_services.door.errors import EXCEPTION_HANDLERS

NO_NUL = "^[^\\x00]*$"
"""No NUL character: PostgreSQL cannot store one."""
FILTER_MAX_CHARS = 200
SORTS = ("group", "newest", "oldest", "deadline")
"""The list door's orders (docs/doors/list.md#filters-and-order); ``group`` is the default. For
every filter, an empty value is the same as leaving it out, so the document admits ``""`` too."""

Page = Annotated[
    int,
    QueryParameter(
        ge=1,
        le=PAGE_MAX,
        description="The page, from 1 (400 when it is not an integer, below 1 or above the maximum).",
    ),
]
PageSize = Annotated[
    int,
    QueryParameter(
        name="pageSize",
        ge=1,
        description=f"Items per page (400 when it is not an integer or below 1). A larger value than "
        f"{PAGE_SIZE_MAX} is not refused: it is lowered to {PAGE_SIZE_MAX} and the response says so "
        "in `page_size`.",
    ),
]
After = Annotated[
    str | None,
    QueryParameter(
        pattern="^[0-9]{1,19}$",
        description="A stream sequence the list must reflect: the door waits (at most 2 s) until its view "
        "has applied the stream that far (docs/doors/list.md#seeding-the-stream).",
    ),
]
Text = Annotated[
    str | None,
    QueryParameter(
        max_length=FILTER_MAX_CHARS,
        pattern=NO_NUL,
        description="Only questions whose text contains this, ignoring case "
        "(docs/doors/list.md#filters-and-order).",
    ),
]
Format = Annotated[
    str | None,
    QueryParameter(
        max_length=FILTER_MAX_CHARS,
        pattern=NO_NUL,
        description="Only questions of this answer format.",
        schema_extra={"enum": [*ANSWER_FORMATS, ""]},
    ),
]
Group = Annotated[
    str | None,
    QueryParameter(
        max_length=FILTER_MAX_CHARS, pattern=NO_NUL, description="Only questions of this group id."
    ),
]
Origin = Annotated[
    str | None,
    QueryParameter(
        max_length=FILTER_MAX_CHARS, pattern=NO_NUL, description="Only questions with this `origin`."
    ),
]
Sort = Annotated[
    str | None,
    QueryParameter(
        max_length=FILTER_MAX_CHARS,
        pattern=NO_NUL,
        description="The order: `group` (groups by their latest question, the default), `newest`, "
        "`oldest` (created_at) or `deadline` (timeout_at, soonest first).",
        schema_extra={"enum": [*SORTS, ""]},
    ),
]
Status = Annotated[
    str | None,
    QueryParameter(
        max_length=FILTER_MAX_CHARS,
        description="Only runs in this status.",
        schema_extra={"enum": list(RUN_STATUSES)},
    ),
]
"""Checked against the statuses by the door (``parse_status``): a ``Literal`` would read the text
``null`` as no status at all."""
Flow = Annotated[
    str | None, QueryParameter(pattern=NO_NUL, description="Only runs of this flow (the exact name).")
]
LastEventId = Annotated[
    str | None,
    QueryParameter(
        description="The same as `Last-Event-ID`, for proxies that strip the header; the header wins."
    ),
]
LastEventIdHeader = Annotated[
    str | None,
    HeaderParameter(
        name="Last-Event-ID",
        description="Resume right after this sequence when it lies in the resume window; an empty "
        "value is absent; anything else starts at the live end.",
    ),
]
DEFAULT_PAGE_SIZE = PAGE_SIZE_DEFAULT


class ListFilter(msgspec.Struct, frozen=True):
    """The list door's optional narrowing and order (docs/doors/list.md#filters-and-order)."""

    q: str | None = None
    format: str | None = None
    group: str | None = None
    origin: str | None = None
    sort: str = "group"

    def args(self) -> tuple[str | None, str | None, str | None, str | None]:
        return (self.q.lower() if self.q else None, self.format, self.group, self.origin)


def no_nul(raw: str, name: str) -> str:
    """``raw``, or a 400 naming the parameter when it holds a NUL character."""
    if "\x00" in raw:
        raise BadInput(f"{name} must not contain NUL characters", field=name)
    return raw


def parse_text(params: Mapping[str, Any], name: str) -> str | None:
    """A free-text filter: absent or empty is None; too long or holding a NUL is a 400 naming it."""
    raw: str | None = params.get(name)
    if raw is None or raw == "":
        return None
    if len(raw) > FILTER_MAX_CHARS:
        raise BadInput(f"{name} must be at most {FILTER_MAX_CHARS} characters", field=name)
    return no_nul(raw, name)


def parse_filter(params: Mapping[str, Any]) -> ListFilter:
    values: dict[str, str] = {}
    for name in ("q", "format", "group", "origin", "sort"):
        raw = parse_text(params, name)
        if raw is not None:
            values[name] = raw
    if "format" in values and values["format"] not in ANSWER_FORMATS:
        raise BadInput(f"format must be one of {', '.join(ANSWER_FORMATS)}", field="format")
    if "sort" in values and values["sort"] not in SORTS:
        raise BadInput(f"sort must be one of {', '.join(SORTS)}", field="sort")
    return ListFilter(**values)


def parse_window(page_raw: str | None, size_raw: str | None) -> tuple[int, int]:
    try:
        page = int(page_raw) if page_raw is not None else 1
        size = int(size_raw) if size_raw is not None else PAGE_SIZE_DEFAULT
    except ValueError:
        raise BadInput(f"page and pageSize must be integers: page={page_raw} pageSize={size_raw}") from None
    if page < 1:
        raise BadInput("page must be >= 1", field="page")
    if size < 1:
        raise BadInput("pageSize must be >= 1", field="pageSize")
    if page > PAGE_MAX:
        raise BadInput(f"page must be <= {PAGE_MAX}", field="page")
    return page, min(size, PAGE_SIZE_MAX)


def parse_after(raw: str | None) -> int | None:
    """``after``: a stream sequence the list must reflect (docs/doors/list.md#seeding-the-stream)."""
    if raw is None:
        return None
    if not raw.isdigit() or len(raw) > 19:
        raise BadInput("after must be a stream sequence (a non-negative integer)", field="after")
    return int(raw)


def parse_status(raw: str | None) -> str | None:
    if raw is not None and raw not in RUN_STATUSES:
        raise BadInput(f"status must be one of {', '.join(RUN_STATUSES)}", field="status")
    return raw


def _flow(params: Mapping[str, Any]) -> None:
    raw = params.get("flow")
    if raw is not None:
        no_nul(raw, "flow")


REFUSALS: tuple[tuple[frozenset[str], Callable[[Mapping[str, Any]], object]], ...] = (
    (
        frozenset({"page", "pageSize", "page_size"}),
        lambda params: parse_window(params.get("page"), params.get("pageSize")),
    ),
    (frozenset({"after"}), lambda params: parse_after(params.get("after"))),
    (frozenset({"q", "format", "group", "origin", "sort"}), parse_filter),
    (frozenset({"status"}), lambda params: parse_status(params.get("status"))),
    (frozenset({"flow"}), _flow),
)
"""Each parameter's own check, in the order the doors run them: the first that refuses a
parameter outside its type names the fault."""


def _refused(request: Request[Any, Any, Any], exc: Exception) -> Response[Any]:
    """A parameter outside its declared type: the 400 of that parameter's own check."""
    assert isinstance(exc, ValidationException)
    keys = {str(e["key"]) for e in (exc.extra or []) if isinstance(e, dict) and e.get("key")}
    params = request.query_params
    declared = {_WIRE_NAMES.get(n, n) for n in request.route_handler.parsed_fn_signature.parameters}
    # The failed parameters, and every other one this door reads that the request carries: a
    # door's earlier check refuses first, whichever parameter its type refused.
    suspects = keys | (declared & set(params))
    for names, check in REFUSALS:
        if names & suspects:
            try:
                check(params)
            except BadInput as refusal:
                return EXCEPTION_HANDLERS[LaybyError](request, refusal)
    key = _WIRE_NAMES.get(min(keys), min(keys)) if keys else None
    return EXCEPTION_HANDLERS[LaybyError](request, BadInput(f"{key} is not valid", field=key))


_WIRE_NAMES = {"page_size": "pageSize", "last_event_id_header": "Last-Event-ID"}
"""A handler's argument name → the parameter's name on the wire, where they differ."""


PARAMETER_HANDLERS = {ValidationException: _refused}
