"""Commands: requests that a service may refuse, sent as core-NATS requests
(docs/engineering.md#events-and-commands).

The SDK sends ``Ask`` and ``Prune`` to the ask service; the resume service publishes ``Wake``
to a blocked asker. Commands forbid unknown fields: a typo is a refusal, never a silent default.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

import msgspec

from layby_contracts.doors import Door, Entry, VisitResult
from layby_contracts.errors import RefusalKind
from layby_contracts.events import ChatOptions, ParkedAsk, Resolution, StepResult
from layby_contracts.formats import FormatPayload
from layby_contracts.notification import NotificationFields
from layby_contracts.question import Question


class Ask(Question, frozen=True, kw_only=True, tag="cmd.ask.v1"):
    """Record a question (the SDK already validated it; the ask service validates again).

    ``format`` carries the question's format and its arguments as one typed value (command
    protocol 5). An SDK facing an older ask service sends the flat fields instead
    (``answer_format``, ``options``, ``schema``, ``data``, ``pages``, ``link_url``, ``verifier``),
    which the ask service still accepts; a command never carries both. ``notify_url`` is protocol
    9 (omitted when unset, so an older ask service takes every ask that does not use it)."""

    token: str
    interaction_id: str
    format: FormatPayload | None = None
    waiter: str | None = None
    run_id: str | None = None
    call: int | None = None
    ticket_hash: str | None = None
    """external: SHA-256 (hex) of the callback ticket; the ticket itself never reaches a service."""
    chat: ChatOptions | None = None
    """Chat-channel reply rules and extra channels (protocol 6; omitted when unused, so an older
    ask service still takes every ask that does not use them)."""


class ReserveTicket(
    msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, tag="cmd.ticket.reserve.v1"
):
    """Bind an external question's ticket before its link is built (ADR 0010), so a callback
    that reaches the door before the question is recorded waits for it instead of a 404."""

    token: str
    interaction_id: str
    ticket_hash: str
    mode: Literal["sync", "async"] = "sync"
    timeout: float | None = None
    expiry_at: datetime | None = None
    run_id: str | None = None
    """async: the run whose call this question will be (checked like the ask itself)."""
    call: int | None = None


class Prune(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, tag="cmd.prune.v1"):
    """Remove a pending sync question whose waiter gave up (timeout or cancellation)."""

    token: str
    interaction_id: str
    reason: Literal["timeout", "cancelled"] = "timeout"


class Look(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, tag="cmd.ask.look.v1"):
    """How a sync question stands, changing nothing: a waiter whose wake may have been lost (its
    connection failed over, or the wake's server was lost) looks instead of waiting out its
    deadline. Answered with a ``PruneResult``: ``pending``, ``answered`` (with the answer) or
    ``gone`` (protocol 10; docs/reliability.md#lost-wakes)."""

    token: str
    interaction_id: str


class StartRun(
    msgspec.Struct,
    frozen=True,
    kw_only=True,
    forbid_unknown_fields=True,
    omit_defaults=True,
    tag="cmd.run.start.v1",
):
    """Start a run of a registered flow; any worker hosting the flow executes it."""

    token: str
    run_id: str
    flow: str
    input: Any = None
    caller: str | None = None
    """``layby.call``: the calling run (its execution's identity must be allowed to act for it)."""
    caller_call: int | None = None
    subject: str | None = None
    """The subject the run's chain parks caller asks on (default: the run's own id)."""
    version: int | None = None
    """The flow version to run on; None: the newest a live worker serves, else 1 (docs/versions.md)."""


class ParkRun(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, tag="cmd.run.park.v1"):
    """The execution of generation ``generation - 1`` suspended on ``asks``."""

    token: str
    run_id: str
    generation: int
    asks: list[ParkedAsk]
    answers: dict[str, Resolution] = {}
    resume_id: str | None = None


class EndRun(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, tag="cmd.run.end.v1"):
    """The execution of generation ``generation`` returned (finished) or gave up (failed)."""

    token: str
    run_id: str
    generation: int
    outcome: Literal["finished", "failed"]
    result: Any = None
    error: str | None = None
    attempts: int = 0
    resume_id: str | None = None


class RecordStep(
    msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, tag="cmd.run.step.v1"
):
    """The execution of ``generation`` finished the step at ``call``: record it before the flow
    goes on (docs/aggregates/run.md#steps)."""

    token: str
    run_id: str
    generation: int
    call: int
    step: StepResult
    resume_id: str | None = None


class CancelRun(
    msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, tag="cmd.run.cancel.v1"
):
    """Cancel a running or parked run (its open questions leave the inbox)."""

    token: str
    run_id: str


class RetryRun(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, tag="cmd.run.retry.v1"):
    """Execute a failed run again from its last recorded step or park."""

    token: str
    run_id: str


class AttachWorker(
    msgspec.Struct,
    frozen=True,
    kw_only=True,
    forbid_unknown_fields=True,
    omit_defaults=True,
    tag="cmd.run.attach.v1",
):
    """A worker that hosts ``flow`` asks for the durable consumer its continuations come from;
    the ask service provisions it (the one place consumers are made) and names it."""

    token: str
    flow: str
    ack_wait_seconds: float = 30.0
    """How long a continuation may run without a sign of progress before another worker gets it."""
    version: int = 1
    """The version of ``flow`` the worker serves: each version has its own consumer (docs/versions.md)."""


class WorkerSeen(
    msgspec.Struct,
    frozen=True,
    kw_only=True,
    forbid_unknown_fields=True,
    omit_defaults=True,
    tag="cmd.run.worker.v1",
):
    """A worker reports in while it runs (every few seconds): which flows it serves, so operators
    see which workers are alive and a start of a flow nobody serves is flagged at once."""

    token: str
    worker_id: str
    flows: list[str]
    host: str | None = None
    pid: int | None = None
    concurrency: int | None = None
    extras: dict[str, list[str]] | None = None
    """The extras keys each flow declared it reads (docs/caller-asks.md#extras)."""
    versions: dict[str, int] | None = None
    """The version of each flow it serves, where not 1 (docs/versions.md)."""


class CheckCurrent(
    msgspec.Struct,
    frozen=True,
    kw_only=True,
    forbid_unknown_fields=True,
    omit_defaults=True,
    tag="cmd.run.current.v1",
):
    """Is the execution of ``generation`` of ``run_id`` the one to run now? (The worker asks
    before it executes a continuation; the answer comes from the run's log.)"""

    token: str
    run_id: str
    generation: int
    version: int = 1
    """The flow version of the continuation: one of a version the run moved away from is a duplicate."""


class MoveRun(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, tag="cmd.run.move.v1"):
    """Move a parked, waiting or failed run to ``version`` of its flow (an operator's decision,
    recorded on the run's log: docs/versions.md#moving-runs)."""

    token: str
    run_id: str
    version: int


class Explicit(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, omit_defaults=True):
    """The generic tools' actions, named by hand instead of by a door contract."""

    cancels: list[str] = []
    resumes: list[dict[str, Any]] = []
    """``{"id": ..., "payload": ...}`` items."""
    takes: list[str] = []


class PutDoor(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, tag="cmd.door.put.v1"):
    """Save a door definition (its jq programs are compiled and checked first)."""

    token: str
    name: str
    spec: dict[str, Any]


class DeleteDoor(
    msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, tag="cmd.door.delete.v1"
):
    token: str
    name: str


class Visit(
    msgspec.Struct,
    frozen=True,
    kw_only=True,
    forbid_unknown_fields=True,
    omit_defaults=True,
    tag="cmd.visit.v1",
):
    """One visit: a door's (``door``, its contract run over ``input``) or a run's generic tool
    (``run_id``, with ``explicit`` actions on that run's subject)."""

    token: str
    visit_id: str
    door: str | None = None
    subject: str | None = None
    """A conversation visit's subject (a hook's and a schedule's come from their door)."""
    input: Any = None
    run_id: str | None = None
    explicit: Explicit | None = None
    kind: Literal["hook", "schedule", "conversation", "tool"] = "hook"


class ListParked(
    msgspec.Struct,
    frozen=True,
    kw_only=True,
    forbid_unknown_fields=True,
    omit_defaults=True,
    tag="cmd.parked.v1",
):
    """Every parked entry on ``subject``, or on the subject of the run ``run_id``."""

    token: str
    subject: str | None = None
    run_id: str | None = None


class VisitStatus(
    msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, tag="cmd.visit.status.v1"
):
    """What a visit did and, once known, the next outcome of what it resumed or started."""

    token: str
    visit_id: str


class Notify(NotificationFields, frozen=True, kw_only=True, tag="cmd.notify.v1"):
    """Send a one-way notification (docs/notifications.md): recorded to the feed with no
    ``channel``, sent on ``channel`` otherwise (and recorded as well when ``audience`` is set).
    Nothing is asked and nothing waits. ``sender_identity`` is accepted on the wire only to be
    refused (400): the sender is always the token's identity (command protocol 8)."""

    token: str
    notification_id: str


NOTIFY_DECODER: msgspec.json.Decoder[Notify] = msgspec.json.Decoder(Notify)
"""The decoder of ``<ns>.cmd.notify`` (its own subject, its one command)."""


class Notified(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, tag="notified"):
    """``sent`` on ``channel`` (``message_ids``: the medium's ids of what it sent; ``recorded`` is
    True when the feed got the notification too), or ``recorded`` to the feed only."""

    outcome: Literal["sent", "recorded"]
    notification_id: str
    channel: str | None = None
    message_ids: list[str] = []
    recorded: bool = False


DoorCommand = PutDoor | DeleteDoor | Visit | ListParked | VisitStatus
DOOR_COMMAND_DECODER: msgspec.json.Decoder[DoorCommand] = msgspec.json.Decoder(DoorCommand)


RunCommand = (
    StartRun
    | ParkRun
    | EndRun
    | AttachWorker
    | CheckCurrent
    | RecordStep
    | CancelRun
    | RetryRun
    | WorkerSeen
    | MoveRun
)
"""The commands of runs and workers (``<ns>.cmd.run``)."""

Command = Ask | ReserveTicket | Prune | Look | RunCommand
COMMAND_DECODER: msgspec.json.Decoder[Command] = msgspec.json.Decoder(Command)


class Accepted(msgspec.Struct, frozen=True, kw_only=True, tag="ok"):
    interaction_id: str
    group_id: str
    timeout_at: str


PROTOCOL = 13
PROTOCOL_VERSIONS = 13
PROTOCOL_ROUTING = 12
PROTOCOL_REVIEW = 11
PROTOCOL_LOOK = 10
PROTOCOL_WEBHOOKS = 9
PROTOCOL_NOTIFY = 8
PROTOCOL_CHAT = 6
PROTOCOL_CALLER = 7
PROTOCOL_RESERVATIONS = 2
PROTOCOL_WORKER_COMMANDS = 3
PROTOCOL_STEPS = 4
PROTOCOL_ERROR_KINDS = 5
PROTOCOL_TYPED_QUESTION = 5
"""The command protocol this side speaks. 1: the first (absent from its replies); 2: ticket
reservations (``cmd.ticket.reserve.v1``) and the ``protocol`` field on refusals; 3: the worker's
``cmd.run.attach.v1`` and ``cmd.run.current.v1``; 4: steps, cancel and retry
(``cmd.run.step.v1``, ``cmd.run.cancel.v1``, ``cmd.run.retry.v1``); 5: every error class its own
refusal kind (``cross_identity_audience``, ``not_found``, ``transient``, ``permanent``, ...)
and the typed question (``Ask.format``); 6: chat options on the ask (``Ask.chat``: several
channels, ``on_mismatch``, ``mismatch_notice``, reply ids); 7: caller asks (``Ask.to``, ``payload``,
``on_expiry``), ``layby.call`` (``StartRun.caller``), doors and visits (``cmd.door``); 8: one-way
notifications (``cmd.notify.v1`` on ``<ns>.cmd.notify``, the ``notified`` reply, a refusal's
``retry_after``); 9: signed webhooks out (``Ask.notify_url``, docs/webhooks.md); 10: a waiter's
look at its question (``cmd.ask.look.v1``, docs/reliability.md#lost-wakes); 11: the ``review``
answer format (``Ask.format`` of type ``review``, docs/review.md); 12: routing on the ask
(``Ask.routing``: quorum, escalation, reminders, docs/routing.md); 13: flow versions
(``StartRun.version``, ``AttachWorker.version``, ``CheckCurrent.version``, ``WorkerSeen.versions``
and ``cmd.run.move.v1``, docs/versions.md)
(docs/errors.md#capabilities-travel-in-the-protocol-field)."""


class Refused(msgspec.Struct, frozen=True, kw_only=True, tag="refused"):
    """``kind`` names the error class the SDK raises (``layby_contracts.refusals``); ``field``
    names the offending argument; ``protocol`` is the refusing service's (1 when absent: a
    service from before the field), so the SDK learns what it supports without reading text."""

    kind: RefusalKind
    message: str
    field: str | None = None
    protocol: int = 1
    retry_after: float | None = None
    """A refusal that may succeed later: the pause the refusing side asks for, when known
    (a channel's busy medium; protocol 8)."""


class PruneResult(msgspec.Struct, frozen=True, kw_only=True, tag="pruned"):
    """``outcome``: pruned now, already answered (answer attached when recorded), or gone; to a
    ``Look``, ``pending`` while the question is open."""

    outcome: Literal["pruned", "answered", "gone", "pending"]
    answer: Any = None
    answered_at: str | None = None
    sensitive: bool = False
    reason: str | None = None
    """gone: why it was removed (``delivery_failed`` lets a waiter whose wake was lost raise right)."""
    detail: str | None = None
    answered_by: str | None = None
    params: dict[str, Any] | None = None
    """answered: the tapped chat control's opaque context (docs/channels.md#enrichment)."""


class Reserved(msgspec.Struct, frozen=True, kw_only=True, tag="reserved"):
    """The ticket is bound; ``existing``: the question was recorded already (keep its link)."""

    existing: bool = False


class RunAccepted(msgspec.Struct, frozen=True, kw_only=True, tag="run"):
    run_id: str
    seq: int
    warning: str | None = None
    """A start of a flow no live worker serves: recorded, and it will run once a worker serves
    the flow; the SDK logs this and the CLI prints it."""
    step: StepResult | None = None
    """A recorded step: set when another execution recorded the step at that call first; every
    execution goes on with that record, not with its own attempt's."""


class Noted(msgspec.Struct, frozen=True, kw_only=True, tag="noted"):
    """A report was recorded."""


class Attached(msgspec.Struct, frozen=True, kw_only=True, tag="attached"):
    """The durable consumer (on ``stream``) a worker binds to for its flow's continuations."""

    stream: str
    durable: str


class Current(msgspec.Struct, frozen=True, kw_only=True, tag="current"):
    """``current``: execute it; ``duplicate``: an earlier execution's, drop it; ``unknown``: the
    run's log has not caught up yet, try again shortly."""

    status: Literal["current", "duplicate", "unknown", "cancelled"]
    steps: dict[str, StepResult] | None = None
    """current: the steps recorded so far when this generation already recorded some (a replay
    after a crash starts from them, not from the continuation's older checkpoint)."""


class Visited(msgspec.Struct, frozen=True, kw_only=True, tag="visited"):
    result: VisitResult


class Listed(msgspec.Struct, frozen=True, kw_only=True, tag="entries"):
    subject: str
    entries: list[Entry]


class DoorReply(msgspec.Struct, frozen=True, kw_only=True, tag="door"):
    door: Door | None = None
    """None: the door was deleted."""


Reply = (
    Accepted
    | Refused
    | PruneResult
    | Reserved
    | RunAccepted
    | Attached
    | Current
    | Noted
    | Visited
    | Listed
    | DoorReply
    | Notified
)
REPLY_DECODER: msgspec.json.Decoder[Reply] = msgspec.json.Decoder(Reply)


class Wake(msgspec.Struct, frozen=True, kw_only=True):
    """Published by the resume service to ``<ns>.wake.<id>`` when a question resolves."""

    interaction_id: str
    outcome: Literal["answered", "removed"]
    answer: Any = None
    answered_by: str | None = None
    answered_at: str | None = None
    reason: str | None = None
    detail: str | None = None
    params: dict[str, Any] | None = None
    """The tapped chat control's opaque context (docs/channels.md#enrichment)."""


WAKE_DECODER: msgspec.json.Decoder[Wake] = msgspec.json.Decoder(Wake)


class Continuation(msgspec.Struct, frozen=True, kw_only=True, tag="continuation.v1"):
    """One resume of a run, on ``<ns>.cont.<flow>.<run>.<generation>`` (generation 0 = the start).

    Published once per (run, generation): the subject must be empty (expected last subject
    sequence 0) and ``Nats-Msg-Id`` is the resume id. ``identity`` is the asker's, never the
    answerer's; ``answers`` holds every resolution so far, by call index.
    """

    run_id: str
    flow: str
    generation: int
    resume_id: str
    identity: str
    input: Any = None
    answers: dict[str, Resolution] = {}
    steps: dict[str, StepResult] = {}
    subject: str | None = None
    """The run chain's subject (its generic tools act on it)."""
    extras: dict[str, Any] | None = None
    version: int = 1
    """The flow version to execute it on (its subject is that version's: docs/versions.md)."""


CONTINUATION_DECODER: msgspec.json.Decoder[Continuation] = msgspec.json.Decoder(Continuation)
