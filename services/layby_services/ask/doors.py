"""Door definitions: save and delete a door, read one (docs/doors/doors.md).

The ask service is the authority for door definitions as for asks: it authenticates the token,
lets only an operator change a door (a door is platform configuration: it starts flows under
its own rules), checks the definition strictly — unknown keys, types, the domain's static rules,
every jq program compiled, a schedule's cron parsed — and only then appends. A save is a plain
upsert by name (the last save wins); a delete expects the door's last event, so two deletes
cannot both succeed.
"""

from __future__ import annotations

import re
import uuid
from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime
from types import UnionType
from typing import Any, Literal, Protocol, Union, get_args, get_origin

import msgspec
from cronsim import CronSim, CronSimError

from layby_contracts.commands import DeleteDoor, DoorReply, PutDoor
from layby_contracts.doors import COLUMNS, Column, Door, DoorSpec
from layby_contracts.errors import BadInput, Forbidden, NotFound, Unauthorized
from layby_contracts.events import DoorDeleted, DoorSaved
from layby_domain.clock import Clock
from layby_domain.doors import check_spec, is_door_name
from layby_domain.values import nul_path
from layby_server.auth import Authenticator, Principal
from layby_server.observability.logs import get_logger
from layby_server.settings import Settings
from layby_server.store.eventlog import as_event, decide_and_append, kept_changing
from layby_server.store.eventstore import EventStore
from layby_server.write.doors import DOOR_NOT_FOUND, OPERATORS_ONLY, door_of, last_door_event

log = get_logger("layby.doors")

CACHE_SECONDS = 2.0
"""How long ``load`` trusts a door it read: another replica's save is seen within this."""
CACHE_SIZE = 4096
CRON_FIELDS = 5
_KEY = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
"""A key that may be named back in a refusal: anything else is not echoed (no door reflects its
input beyond field names)."""
_FIELDS = frozenset(f.encode_name for f in msgspec.structs.fields(DoorSpec))


class Compiler(Protocol):
    """What the handlers need of ``layby_server.write.jqrun.JqRunner``: compile one program."""

    async def check(self, column: Column, program: str) -> None: ...


def _expected(annotation: Any) -> str:
    """How a refusal describes the type a DoorSpec field takes (a Literal's values in their
    declared order)."""
    kinds: list[str] = []
    arms = get_args(annotation) if get_origin(annotation) in (Union, UnionType) else (annotation,)
    for arm in arms:
        if get_origin(arm) is Literal:
            kinds.append("one of " + ", ".join(map(str, get_args(arm))))
        elif arm is str:
            kinds.append("a string")
        elif arm in (int, float):
            kinds.append("a number")
        elif dict in (arm, get_origin(arm)):
            kinds.append("an object")
    return " or ".join(kinds) or "of another type"


_EXPECTED = {f.encode_name: _expected(f.type) for f in msgspec.structs.fields(DoorSpec)}


def decode_spec(raw: dict[str, Any]) -> DoorSpec:
    """A door definition from its JSON object, strictly: an unknown key, a missing one or a value
    of the wrong type is refused naming the field, never echoing the value."""
    for key in raw:
        if key not in _FIELDS:
            if isinstance(key, str) and _KEY.match(key):
                raise BadInput(f"unknown field {key!r}", field=key)
            raise BadInput("the spec has an unknown field")
    where = nul_path(raw)
    if where is not None:
        raise BadInput("spec must not contain NUL characters", field=where or None)
    try:
        return msgspec.convert(raw, DoorSpec)
    except msgspec.ValidationError as exc:
        raise _refusal(str(exc)) from None


def _refusal(error: str) -> BadInput:
    """msgspec's complaint (``Expected `str`, got `int` - at `$.target```) as the refusal that
    names the field; msgspec's own text may quote the value, so it is not passed on."""
    missing = re.match(r"Object missing required field `([^`]+)`", error)
    if missing:
        return BadInput(f"{missing.group(1)} is required", field=missing.group(1))
    path = re.search(r" - at `\$\.?([^`]*)`$", error)
    field = path.group(1) if path else ""
    top = re.split(r"[.\[]", field, maxsplit=1)[0]
    if top in _EXPECTED:
        return BadInput(f"{top} must be {_EXPECTED[top]}", field=top)
    return BadInput("the spec is not a door definition", field=top or None)


def check_cron(spec: DoorSpec, now: datetime) -> None:
    """A schedule's cron is five fields (UTC) that ``cronsim`` parses; its message names the
    field of the expression at fault, never the expression."""
    if spec.cron is None:
        return
    if len(spec.cron.split()) != CRON_FIELDS:
        raise BadInput("cron does not parse: a cron expression has five fields", field="cron")
    try:
        CronSim(spec.cron, now)
    except (CronSimError, ValueError) as exc:
        raise BadInput(f"cron does not parse: {exc}", field="cron") from None


@dataclass(frozen=True, slots=True)
class _Last:
    """A door subject as read: its last event's sequence (0: none) and the door it shows."""

    seq: int
    door: Door | None


class DoorHandlers:
    def __init__(
        self, settings: Settings, store: EventStore, auth: Authenticator, clock: Clock, jq: Compiler
    ) -> None:
        self._settings = settings
        self._store = store
        self._auth = auth
        self._clock = clock
        self._jq = jq
        self._cache: OrderedDict[str, tuple[float, Door | None]] = OrderedDict()

    def _operator(self, token: str) -> Principal:
        try:
            principal = self._auth.principal(token)
        except Unauthorized as exc:
            raise Unauthorized(str(exc), field="token") from None
        if principal.restricted:
            raise Forbidden(OPERATORS_ONLY)
        return principal

    async def load(self, name: str) -> Door | None:
        """The door as its last event shows it (None: unknown or deleted), trusted for
        ``CACHE_SECONDS``; this process's own saves and deletes replace it at once."""
        if not is_door_name(name):
            return None
        now = self._clock.monotonic()
        cached = self._cache.get(name)
        if cached is not None and now - cached[0] < CACHE_SECONDS:
            return cached[1]
        stored = await last_door_event(self._store, name)
        door = door_of(stored.event if stored is not None else None)
        self._remember(name, door)
        return door

    def _remember(self, name: str, door: Door | None) -> None:
        self._cache[name] = (self._clock.monotonic(), door)
        self._cache.move_to_end(name)
        if len(self._cache) > CACHE_SIZE:
            self._cache.popitem(last=False)

    async def check(self, name: str, raw: dict[str, Any]) -> DoorSpec:
        """Every rule a definition must pass before it is saved, in order: its keys and types,
        the domain's static rules, its size, each jq program, a schedule's cron."""
        spec = decode_spec(raw)
        check_spec(name, spec)
        size = len(msgspec.json.encode(spec))
        if size > self._settings.max_body_bytes:
            raise BadInput(f"the definition is {size} bytes; the limit is {self._settings.max_body_bytes}")
        for column in COLUMNS:
            program = getattr(spec, f"{column}_expr")
            if program is not None:
                await self._jq.check(column, program)
        if spec.kind == "schedule":
            check_cron(spec, self._clock.now())
        return spec

    async def put(self, cmd: PutDoor) -> DoorReply:
        principal = self._operator(cmd.token)
        spec = await self.check(cmd.name, cmd.spec)
        event = DoorSaved(name=cmd.name, spec=spec, by=principal.identity, saved_at=self._clock.now())
        # A plain upsert: no expected sequence, and a fresh id, since two saves of one name are
        # two decisions (the later one stands).
        subject = self._store.names.door(cmd.name)
        msg_id = f"door-{cmd.name}-{uuid.uuid4().hex}"
        await self._store.append(subject, event, msg_id=msg_id, expected_seq=None)
        door = door_of(event)
        self._remember(cmd.name, door)
        log.info("door.saved", door=cmd.name, kind=spec.kind, target=spec.target, by=principal.identity)
        return DoorReply(door=door)

    async def delete(self, cmd: DeleteDoor) -> DoorReply:
        principal = self._operator(cmd.token)
        if not is_door_name(cmd.name):
            raise NotFound(DOOR_NOT_FOUND)  # no door can have this name: the uniform 404

        async def read(_leader: bool) -> _Last:
            stored = await last_door_event(self._store, cmd.name)
            if stored is None:
                return _Last(0, None)
            return _Last(stored.seq, door_of(stored.event))

        def decide(last: _Last) -> DoorDeleted:
            if last.door is None:
                raise NotFound(DOOR_NOT_FOUND)
            return DoorDeleted(name=cmd.name, by=principal.identity, deleted_at=self._clock.now())

        outcome = await decide_and_append(
            self._store,
            self._store.names.door(cmd.name),
            read=read,
            decide=decide,
            event_of=as_event,
            msg_id=lambda _: f"door-{cmd.name}-{uuid.uuid4().hex}",
        )
        if outcome.seq is None:
            raise kept_changing("the door", "while it was deleted")
        self._remember(cmd.name, None)
        log.info("door.deleted", door=cmd.name, by=principal.identity)
        return DoorReply(door=None)
