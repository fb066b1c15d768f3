"""The door contract's pure rules (docs/caller-asks.md#the-door-contract): what a door definition
may hold, what each of its four programs must yield, and what one visit does with the values.

Running the programs is the server's business (``layby_server.write.jqrun``, a sandbox of child
processes); this module only judges their values, so the SDK and the services share it without
either one importing jq. Every error is a ``BadInput`` naming the field, and a value an author's
program yielded is never echoed back: at most its JSON type is named.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any, Literal, overload

import msgspec

from layby_contracts.doors import COLUMNS, Column, DoorSpec, Entry
from layby_contracts.errors import BadInput
from layby_domain.validation import is_flow_name, is_subject
from layby_domain.values import nul_path

EXPR_MAX_CHARS = 4096
CRON_MAX_CHARS = 120
SUBJECTS_MAX_CHARS = 128
KWARGS_MAX_BYTES = 65536
EVERY_SECONDS_MAX = 31 * 24 * 3600
ID_SHOWN_MAX_CHARS = 64
"""An id named in an error is cut here: ids come from the author's own program, but a program can
make one as long as it likes."""

_DOOR_NAME_RE = re.compile(r"^[a-z0-9_-]{1,64}$")

_SHAPES: dict[Column, str] = {
    "cancel": "null, an id, or a list of ids",
    "resume": "null, an id, {id, payload}, or a list of these",
    "start": "an object or null",
    "extras": "an object or null",
}


class Resume(msgspec.Struct, frozen=True):
    """Answer the asking entry ``id`` with ``payload`` (``resume_expr`` yielded ``{id, payload}``)."""

    id: str
    payload: Any


class Take(msgspec.Struct, frozen=True):
    """Take the waiting outcome ``id`` (``resume_expr`` yielded a bare id)."""

    id: str


class VisitPlan(msgspec.Struct, frozen=True, kw_only=True):
    """What one visit does, in order: every cancel, then at most one action — the resumes and
    takes ``resume_expr`` named, or else a start (``start`` holds its kwargs; ``None`` starts
    nothing) with its ``extras``."""

    cancels: list[str]
    resumes: list[Resume]
    takes: list[Take]
    start: dict[str, Any] | None
    extras: dict[str, Any] | None


def is_door_name(value: object) -> bool:
    """Door names are path parts and subject tokens: 1-64 of [a-z0-9_-]."""
    return isinstance(value, str) and bool(_DOOR_NAME_RE.match(value))


def check_spec(name: str, spec: DoorSpec) -> None:
    """Check a door definition before it is saved; raise ``BadInput`` naming the first bad field.

    Compiling the programs (an undeclared ``$name`` is refused then) and checking a cron
    expression's syntax are the server's part, on top of these rules.
    """
    if not is_door_name(name):
        raise BadInput("name must be 1-64 of a-z 0-9 _ -", field="name")
    if not is_flow_name(spec.target):
        raise BadInput("target must be a flow name: 1-64 of A-Z a-z 0-9 _ -", field="target")
    if spec.subject is not None:
        if spec.kind == "conversation":
            raise BadInput(
                "subject is not for conversations: a conversation drives its own subject", field="subject"
            )
        if not is_subject(spec.subject):
            raise BadInput("subject must be 1-128 of A-Z a-z 0-9 _ : @ -", field="subject")
    _check_kind_fields(spec)
    for column in COLUMNS:
        _check_expr(column, getattr(spec, f"{column}_expr"))
    if spec.kwargs is not None:
        _check_json_object("kwargs", spec.kwargs)


def _check_kind_fields(spec: DoorSpec) -> None:
    only: tuple[tuple[str, str, str], ...] = (
        ("every_seconds", "schedule", "schedules"),
        ("cron", "schedule", "schedules"),
        ("input", "schedule", "schedules"),
        ("verifier", "hook", "hooks"),
        ("channel", "conversation", "conversations"),
        ("subjects", "conversation", "conversations"),
    )
    for field, kind, kinds in only:
        if getattr(spec, field) is not None and spec.kind != kind:
            raise BadInput(f"{field} is only for {kinds}", field=field)
    if spec.kind == "schedule":
        _check_schedule(spec)
    if spec.channel is not None and not spec.channel.strip():
        raise BadInput("channel must name a registered channel", field="channel")
    if spec.subjects is not None and (
        not spec.subjects.strip() or len(spec.subjects) > SUBJECTS_MAX_CHARS or "\x00" in spec.subjects
    ):
        raise BadInput(
            f"subjects must be a non-blank glob of at most {SUBJECTS_MAX_CHARS} characters", field="subjects"
        )


def _check_schedule(spec: DoorSpec) -> None:
    if spec.every_seconds is None and spec.cron is None:
        raise BadInput("a schedule needs every_seconds or cron", field="every_seconds")
    if spec.every_seconds is not None and spec.cron is not None:
        raise BadInput("every_seconds and cron are mutually exclusive: give one", field="cron")
    if spec.every_seconds is not None and not (
        math.isfinite(spec.every_seconds) and 1 <= spec.every_seconds <= EVERY_SECONDS_MAX
    ):
        raise BadInput(
            f"every_seconds must be between 1 and {EVERY_SECONDS_MAX} (31 days)", field="every_seconds"
        )
    if spec.cron is not None and (
        not spec.cron.strip() or len(spec.cron) > CRON_MAX_CHARS or "\x00" in spec.cron
    ):
        raise BadInput(
            f"cron must be a non-blank cron expression of at most {CRON_MAX_CHARS} characters", field="cron"
        )
    if spec.input is not None:
        _check_json("input", spec.input)


def _check_expr(column: Column, program: str | None) -> None:
    field = f"{column}_expr"
    if program is None:
        return
    if len(program) > EXPR_MAX_CHARS:
        raise BadInput(f"{field} is {len(program)} characters; the limit is {EXPR_MAX_CHARS}", field=field)
    if not program.strip():
        raise BadInput(f"{field} must not be blank (leave it out instead)", field=field)
    if "\x00" in program:
        raise BadInput(f"{field} must not contain NUL characters", field=field)


def _check_json_object(field: str, value: object) -> None:
    if not isinstance(value, dict):
        raise BadInput(f"{field} must be a JSON object", field=field)
    _check_json(field, value)


def _check_json(field: str, value: object) -> None:
    try:
        size = len(msgspec.json.encode(value))
    except (TypeError, msgspec.EncodeError):
        raise BadInput(f"{field} must be JSON", field=field) from None
    if size > KWARGS_MAX_BYTES:
        raise BadInput(f"{field} is {size} bytes as JSON; the limit is {KWARGS_MAX_BYTES}", field=field)
    if nul_path(value) is not None:
        raise BadInput(f"{field} must not contain NUL characters", field=field)


@overload
def shape(column: Literal["cancel"], values: list[Any]) -> list[str]: ...
@overload
def shape(column: Literal["resume"], values: list[Any]) -> list[Resume | Take]: ...
@overload
def shape(column: Literal["start", "extras"], values: list[Any]) -> dict[str, Any] | None: ...
@overload
def shape(column: Column, values: list[Any]) -> list[str] | list[Resume | Take] | dict[str, Any] | None: ...
def shape(column: Column, values: list[Any]) -> list[str] | list[Resume | Take] | dict[str, Any] | None:
    """The one value ``values`` holds, in its column's normal form: ``cancel`` a list of ids,
    ``resume`` a list of resumes and takes (both empty for ``null``), ``start`` and ``extras`` an
    object or ``None``. ``BadInput`` for no value, more than one, or a value of another shape."""
    field = f"{column}_expr"
    if not values:
        raise BadInput(f"{field} yielded no value; it must yield exactly one", field=field)
    if len(values) > 1:
        raise BadInput(f"{field} yielded more than one value; it must yield exactly one", field=field)
    value = values[0]
    match column:
        case "cancel":
            return _ids(value)
        case "resume":
            return _resume_items(value)
        case "start" | "extras":
            if value is None or isinstance(value, dict):
                return value
            raise _wrong_shape(column, _json_type(value))


def _ids(value: object) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        for item in value:
            if not isinstance(item, str):
                raise _wrong_shape("cancel", f"a list holding {_json_type(item)}")
        return list(value)
    raise _wrong_shape("cancel", _json_type(value))


def _resume_items(value: object) -> list[Resume | Take]:
    if value is None:
        return []
    if isinstance(value, list):
        return [_resume_item(item, in_list=True) for item in value]
    return [_resume_item(value, in_list=False)]


def _resume_item(value: object, *, in_list: bool) -> Resume | Take:
    if isinstance(value, str):
        return Take(value)
    if isinstance(value, dict):
        if set(value) != {"id", "payload"}:
            what = "an object without exactly the keys id and payload"
        elif not isinstance(value["id"], str):
            what = f"{{id, payload}} whose id is {_json_type(value['id'])}"
        else:
            return Resume(value["id"], value["payload"])
    else:
        what = _json_type(value)
    raise _wrong_shape("resume", f"a list holding {what}" if in_list else what)


def _wrong_shape(column: Column, what: str) -> BadInput:
    field = f"{column}_expr"
    return BadInput(f"{field} must yield {_SHAPES[column]}; it yielded {what}", field=field)


def _json_type(value: object) -> str:
    """The JSON type of a value, with its article; never the value itself."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return "a value that is not JSON"


def plan_visit(results: Mapping[Column, list[Any]], *, parked: list[Entry], spec: DoorSpec) -> VisitPlan:
    """Decide one visit from the values each of the door's programs yielded (``results`` holds
    the columns whose program the door has). Every check runs before anything happens: a visit
    that is refused has changed nothing.

    Every program's value is checked against its shape, used or not, so a broken program shows on
    the first visit rather than on the first visit that needs it.
    """
    cancels = shape("cancel", results["cancel"]) if "cancel" in results else []
    items = shape("resume", results["resume"]) if "resume" in results else []
    start = shape("start", results["start"]) if "start" in results else dict(spec.kwargs or {})
    extras = shape("extras", results["extras"]) if "extras" in results else None

    _refuse_repeats("cancel", cancels)
    _refuse_repeats("resume", [item.id for item in items])
    by_id = {entry.id: entry for entry in parked}
    _refuse_unknown("cancel", cancels, by_id)
    _refuse_unknown("resume", [item.id for item in items], by_id)
    cancelled = set(cancels)
    for item in items:
        _check_item(item, by_id[item.id], cancelled)

    if items:
        return VisitPlan(
            cancels=cancels,
            resumes=[item for item in items if isinstance(item, Resume)],
            takes=[item for item in items if isinstance(item, Take)],
            start=None,
            extras=None,
        )
    return VisitPlan(
        cancels=cancels, resumes=[], takes=[], start=start, extras=extras if start is not None else None
    )


def _refuse_unknown(column: Column, ids: list[str], by_id: Mapping[str, Entry]) -> None:
    for entry_id in ids:
        if entry_id not in by_id:
            raise BadInput(
                f"{column}_expr named {_shown(entry_id)}, which is not parked on this subject",
                field=f"{column}_expr",
            )


def _check_item(item: Resume | Take, entry: Entry, cancelled: set[str]) -> None:
    """One entry resume_expr named: not also cancelled, and in a state its action applies to."""
    if item.id in cancelled:
        verb = "resume" if isinstance(item, Resume) else "take"
        raise BadInput(
            f"entry {_shown(item.id)} is named by both cancel_expr and resume_expr; "
            f"a visit cannot cancel and {verb} the same entry",
            field="resume_expr",
        )
    match item:
        case Resume() if entry.status != "asking":
            raise BadInput(
                f"entry {_shown(item.id)} is {entry.status}; only an asking entry can be resumed",
                field="resume_expr",
            )
        case Take() if entry.status not in ("finished", "failed"):
            raise BadInput(
                f"entry {_shown(item.id)} is {entry.status}; "
                "only a finished or failed waiting outcome can be taken",
                field="resume_expr",
            )
        case _:
            pass


def _refuse_repeats(column: Column, ids: list[str]) -> None:
    seen: set[str] = set()
    for entry_id in ids:
        if entry_id in seen:
            raise BadInput(f"{column}_expr named {_shown(entry_id)} more than once", field=f"{column}_expr")
        seen.add(entry_id)


def _shown(entry_id: str) -> str:
    return entry_id if len(entry_id) <= ID_SHOWN_MAX_CHARS else entry_id[: ID_SHOWN_MAX_CHARS - 1] + "…"
