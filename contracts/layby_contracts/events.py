"""Events: facts appended to the JetStream log (docs/engineering.md#evolving-event-schemas).

One frozen Struct per event, an explicit versioned tag, and one union per stream. New fields
get defaults; a change of meaning is a new ``.v2`` tag. Events do not forbid unknown fields.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

import msgspec

from layby_contracts.doors import DoorSpec, Outcome, Taken
from layby_contracts.limits import ANSWERED_BY_EXPIRY

EVENT_SCHEMA = 1
"""The version of the event schemas as a whole, recorded with the event log at every start.

Bumped when an event's meaning changes with a new tag family (``*.v2``), i.e. when a log written
by this build may hold events an older build would misread. A build refuses to start on a log
recorded with a higher number (docs/engineering.md#evolving-event-schemas). Adding a field with a
default, or a new event, does not bump it: older readers skip unknown fields as they are."""


class MediaItem(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """Display-only media on a question (docs/asking.md#media, docs/asking.md#media-items)."""

    kind: Literal["image", "document", "video", "audio", "link"]
    url: str
    caption: str | None = None
    filename: str | None = None


class ChannelTarget(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One channel a question is delivered to, and where on it (docs/channels.md#several-channels)."""

    channel: str
    recipient: str | None = None


class ChatOptions(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """How a chat channel treats replies to a question (docs/channels.md#replies).

    ``targets``: every channel the question goes to, when more than one (the first is also the
    Asked event's ``channel``/``recipient``). ``on_mismatch``: what a reply the question refuses
    does (``retry``, the default: the person is told what is expected; ``bridge``: no notice, the
    reply becomes an inbound message). ``mismatch_notice`` replaces the built-in retry line
    (``{reason}`` is filled with the refusal). ``reply_ids``: the author's id of each option (or
    suggested reply), sent back as ``params.reply_id`` when the person taps it."""

    targets: list[ChannelTarget] | None = None
    on_mismatch: Literal["retry", "bridge"] = "retry"
    mismatch_notice: str | None = None
    reply_ids: list[str] | None = None


class EscalationStep(
    msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, forbid_unknown_fields=True
):
    """One step of a question's escalation (docs/routing.md#escalation): when nobody has decided
    ``after`` seconds after it was asked, the question is also offered to the identities ``to``
    and delivered on ``channel`` (to ``recipient``)."""

    after: float
    to: list[str] | None = None
    channel: str | None = None
    recipient: str | None = None


class Routing(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, forbid_unknown_fields=True):
    """Who decides a question and what happens while nobody does (docs/routing.md).

    ``voters``: the identities whose decisions count (absent: anyone who may answer it);
    ``required``: how many of them must agree (a quorum; 1 is the first answer); ``veto``: a
    negative decision (a confirm's no, a review's reject) by any voter decides at once;
    ``escalate``: the steps offering the question to more people while it stays undecided;
    ``remind_every``: seconds between reminders to everyone it is offered to, at most
    ``reminders`` of them."""

    voters: list[str] | None = None
    required: int = 1
    veto: bool = True
    escalate: list[EscalationStep] | None = None
    remind_every: float | None = None
    reminders: int = 3


class Vote(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One person's decision on a routed question: who, when, where, and what they decided
    (absent on a sensitive question)."""

    by: str
    at: datetime
    via: str | None = None
    answer: Any = None


class Delegation(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """``by`` handed their part in a question to ``to`` (docs/routing.md#delegation)."""

    by: str
    to: str
    at: datetime
    note: str | None = None


class Progress(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """Where a routed question stands, carried whole by each of its routing events so that the
    last event on its subject is enough (with the asked event) to decide the next one: the votes
    so far, the escalation steps taken, the reminders sent, the delegations made and the
    identities it is offered to beyond its audience."""

    votes: list[Vote] = msgspec.field(default_factory=list)
    escalated: int = 0
    reminded: int = 0
    delegations: list[Delegation] = msgspec.field(default_factory=list)
    offered: list[str] = msgspec.field(default_factory=list)


class InteractionAsked(msgspec.Struct, frozen=True, kw_only=True, tag="interaction.asked.v1"):
    """A question was validated and recorded by the ask service
    (docs/aggregates/interaction.md#the-recorded-question)."""

    interaction_id: str
    group_id: str
    question: str
    answer_format: str
    format_payload: dict[str, Any] | None = None
    created_at: datetime
    timeout_at: datetime
    sensitive: bool = False
    audience: str | None = None
    asked_by: str
    mode: Literal["sync", "async"] = "sync"
    expiry_at: datetime | None = None
    media: list[MediaItem] | None = None
    channel: str | None = None
    recipient: str | None = None
    origin: str | None = None
    waiter: str | None = None
    """Where a blocked sync asker listens (``<ns>.wake.<waiter>.<id>``); never sent to clients."""
    run_id: str | None = None
    """An async park: the run that parked on this question (never sent to clients)."""
    call: int | None = None
    """An async park: the ask's call index within its run (replay matches answers by it)."""
    chat: ChatOptions | None = None
    """A channel question's reply rules and extra channels (absent: one channel, the defaults)."""
    to: Literal["caller"] | None = None
    """``caller``: a caller ask (docs/caller-asks.md): it asks the run that called the asking run,
    parks on ``subject``, never reaches a person, and is hidden from every inbox surface."""
    subject: str | None = None
    payload: Any = None
    """A caller ask's structured value for the resolving run."""
    on_expiry: Literal["kill", "resume"] | None = None
    """A caller ask's deadline: ``kill`` (the default) tears the whole run chain down, ``resume``
    resumes the run with the expiry marker."""
    chain: list[str] | None = None
    """A caller ask's ``asked_by`` as entries show it: the flows of the run chain, top first."""
    notify_url: str | None = None
    """Where the delivery service POSTs the outcome, signed with ``asked_by``'s secret
    (docs/webhooks.md); never sent to clients."""
    routing: Routing | None = None
    """Quorum, escalation, reminders (docs/routing.md); absent: the first answer decides."""


class InteractionAnswered(msgspec.Struct, frozen=True, kw_only=True, tag="interaction.answered.v1"):
    """The first answer won the log-decided race. ``answer`` is absent for sensitive questions."""

    interaction_id: str
    group_id: str
    audience: str | None = None
    answered_by: str
    answered_at: datetime
    sensitive: bool = False
    answer: Any = None
    waiter: str | None = None
    secret_ref: str | None = None
    """For a sensitive question: which ``<ns>.secret.<id>.<ref>`` message holds the answer."""
    run_id: str | None = None
    """Copied from the Asked event: the parked run this resolution may resume."""
    via: str | None = None
    """Where the answer came from: ``inbox``, ``cli`` or ``api`` (the answer door, as the client
    says), ``callback`` (an outside system's callback), ``channel`` (a reply on a chat channel),
    ``expiry`` (the deadline passed). Informs the done list (docs/doors/done.md); absent on answers
    recorded before it existed."""
    params: dict[str, Any] | None = None
    """Opaque context a tapped channel control carried (``reply_id``...): transport data the asker
    reads beside the answer, never trusted (docs/channels.md#enrichment)."""
    channels: list[str] | None = None
    """The channels the question was delivered to: the delivery service retracts their copies."""
    to: Literal["caller"] | None = None
    """A caller ask resumed (hidden from every inbox surface)."""
    visit: str | None = None
    """The visit (a door, or a run's generic tool) that resumed this caller ask: the resumed run
    reports its next outcome to it (docs/caller-asks.md#resume-take-and-cancel)."""
    votes: list[Vote] | None = None
    """A routed question: every vote, the deciding one last (docs/routing.md#quorum)."""
    offered: list[str] | None = None
    """A routed question: the identities beyond ``audience`` it was offered to (they see it end)."""


class InteractionRemoved(msgspec.Struct, frozen=True, kw_only=True, tag="interaction.removed.v1"):
    """A pending question was pruned: sync timeout, cancellation or an abandoned waiter."""

    interaction_id: str
    group_id: str
    audience: str | None = None
    reason: Literal["timeout", "cancelled", "abandoned", "delivery_failed", "dropped"]
    removed_at: datetime
    waiter: str | None = None
    run_id: str | None = None
    detail: str | None = None
    """delivery_failed: why the channel could not deliver (for the asker's error; no client sees it)."""
    channels: list[str] | None = None
    """The channels the question was delivered to: the delivery service retracts their copies."""
    to: Literal["caller"] | None = None
    """A caller ask or its waiting outcome left the subject (``dropped``: a waiting outcome nobody
    took within the retention horizon)."""
    offered: list[str] | None = None
    """A routed question: the identities beyond ``audience`` it was offered to (they see it end)."""


class InteractionRouted(msgspec.Struct, frozen=True, kw_only=True, tag="interaction.routed.v1"):
    """A routed question moved without being decided (docs/routing.md): a vote that did not decide
    it, an escalation step, a reminder or a delegation. Appended on the question's subject by the
    same compare-and-set as an answer; ``progress`` is the whole of where it stands, so the next
    decision needs only this event and the asked one (at ``asked_seq``)."""

    interaction_id: str
    group_id: str
    audience: str | None = None
    step: Literal["voted", "escalated", "reminded", "delegated"]
    by: str
    at: datetime
    progress: Progress
    asked_seq: int
    targets: list[ChannelTarget] | None = None
    """escalated or reminded: the channels to deliver it on now (the delivery service sends)."""
    next_at: datetime | None = None
    """When its next escalation or reminder is due (None: no more before its deadline)."""
    to: list[str] | None = None
    """escalated: the people this step offered it to; delegated: the delegate."""
    waiter: str | None = None
    run_id: str | None = None
    channels: list[str] | None = None


class InteractionWithdrawn(msgspec.Struct, frozen=True, kw_only=True, tag="interaction.withdrawn.v1"):
    """A prune reached the ask service before its question was recorded: ``by`` will not ask
    ``interaction_id`` after all (a cancelled asker). Kept on its own subject, never the
    question's, so it can only stop an ask of ``by`` — nobody can pre-empt another identity's
    question by guessing its id. No client ever sees it."""

    interaction_id: str
    by: str
    reason: Literal["timeout", "cancelled", "abandoned", "delivery_failed"]
    withdrawn_at: datetime


class ParkedAsk(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One async question a run parked on, or (``kind="call"``) a child run it waits for: then
    ``interaction_id`` is the child's run id and ``question`` its flow."""

    interaction_id: str
    call: int
    question: str
    expiry_at: datetime | None
    kind: Literal["ask", "call"] = "ask"


class Resolution(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """How one ask of a run resolved: the answer, or the reserved expiry marker."""

    interaction_id: str
    question: str
    answer: Any = None
    answered_by: str | None = None
    detail: str | None = None
    """``system:delivery_failed``: why the channel could not deliver the question."""
    params: dict[str, Any] | None = None
    """The tapped chat control's opaque context (docs/channels.md#enrichment)."""


class StepResult(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """How one ``layby.step`` call ended: its JSON result, or its last attempt's error."""

    name: str
    result: Any = None
    error: str | None = None
    """``ExceptionType: message`` of the last attempt; the step raises ``StepFailedError`` on replay."""
    attempts: int = 1


class Moved(msgspec.Struct, frozen=True, kw_only=True):
    """An operator moved the run to another version of its flow (``layby runs migrate``): the
    event carrying it repeats the run's state with the new ``version`` (docs/versions.md)."""

    from_version: int
    by: str
    at: datetime


class RunStarted(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, tag="run.started.v1"):
    """A run of a registered flow was started; ``identity`` is the asker every resume runs as."""

    run_id: str
    flow: str
    identity: str
    role: Literal["operator", "user"] = "user"
    """The starter's role: asks made while resuming are clamped as that identity's would be."""
    input: Any = None
    started_at: datetime
    subject: str | None = None
    """The subject the run's chain parks caller asks on (docs/caller-asks.md#parks-on-the-subject);
    None: the run's own id."""
    caller: str | None = None
    """The run that called this one with ``layby.call`` (it waits for this run's next outcome)."""
    caller_call: int | None = None
    chain: list[str] | None = None
    """The flows of the run chain, top first, ending with this run's."""
    door: str | None = None
    """The door whose visit started the run."""
    visits: list[str] = []
    """Visits waiting for this run's next outcome (docs/caller-asks.md#resume-take-and-cancel)."""
    extras: dict[str, Any] | None = None
    version: int = 1
    """The version of its flow the run started on: only workers serving that version execute it
    (docs/versions.md)."""


class RunParked(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, tag="run.parked.v1"):
    """The run suspended on ``asks`` (one park, ``generation`` = how many parks so far).

    ``answers`` is the checkpoint: every resolution of earlier parks, by call index, so a
    resume replays the flow without reading the log's history.
    """

    run_id: str
    generation: int
    asks: list[ParkedAsk]
    answers: dict[str, Resolution] = {}
    parked_at: datetime
    resume_id: str | None = None
    """The resume the run was executing when it parked (None for the first execution)."""
    steps: dict[str, StepResult] = {}
    """Every step recorded so far, by call index (part of the checkpoint, like ``answers``)."""
    visits: list[str] = []
    """Visits waiting for the run chain's next outcome (docs/caller-asks.md#resume-take-and-cancel)."""
    version: int = 1
    """The flow version the run is on (docs/versions.md)."""
    moved: Moved | None = None
    """Set on the copy an operator's move appended (the state is unchanged but for ``version``)."""


class RunResumed(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, tag="run.resumed.v1"):
    """The last ask of park ``generation`` resolved: the one resume of that park.

    Appended before the continuation is published, with the park's sequence expected, so it is
    the exactly-once decision; ``answers`` (every resolution so far) lets the continuation be
    re-published after a crash.
    """

    run_id: str
    generation: int
    resume_id: str
    resumed_at: datetime
    answers: dict[str, Resolution] = {}
    steps: dict[str, StepResult] = {}
    retried_by: str | None = None
    """Set when a person retried a failed run (``generation`` then follows the failed one)."""
    visits: list[str] = []
    """Visits waiting for the run chain's next outcome (docs/caller-asks.md#resume-take-and-cancel)."""
    version: int = 1
    """The flow version the resumed execution runs on (docs/versions.md)."""
    moved: Moved | None = None
    """Set on the copy an operator's move appended: the continuation is published again, on the
    new version's subject."""


class RunFinished(msgspec.Struct, frozen=True, kw_only=True, tag="run.finished.v1"):
    run_id: str
    generation: int
    result: Any = None
    finished_at: datetime
    resume_id: str | None = None
    step_count: int = 0
    """How many steps the run recorded in all (its dashboard count; the steps stay on the step
    streams)."""
    visits: list[str] = []
    """Visits waiting for the run chain's next outcome (docs/caller-asks.md#resume-take-and-cancel)."""


class RunFailed(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, tag="run.failed.v1"):
    """The flow raised on every attempt (or could not be resumed); ``error`` says why."""

    run_id: str
    generation: int
    error: str
    attempts: int = 0
    failed_at: datetime
    resume_id: str | None = None
    answers: dict[str, Resolution] = {}
    steps: dict[str, StepResult] = {}
    """The checkpoint the failed execution had: a retry resumes from it, not from scratch."""
    visits: list[str] = []
    """Visits waiting for the run chain's next outcome (docs/caller-asks.md#resume-take-and-cancel)."""
    version: int = 1
    """The flow version the run failed on; a retry runs on it (docs/versions.md)."""
    moved: Moved | None = None


class RunStepRecorded(msgspec.Struct, frozen=True, kw_only=True, tag="run.step.v1"):
    """Execution ``generation`` finished the step at ``call``; ``steps`` holds every step recorded
    so far (the checkpoint a replay of this generation starts from).

    No longer written: steps are recorded as ``StepRecorded`` on the step streams
    (docs/aggregates/run.md#steps). Runs recorded before that still end their log with it, so it
    is still read (a running run, with ``steps`` as its checkpoint).
    """

    run_id: str
    generation: int
    call: int
    step: StepResult
    steps: dict[str, StepResult] = {}
    answers: dict[str, Resolution] = {}
    recorded_at: datetime
    resume_id: str | None = None


class StepRecorded(msgspec.Struct, frozen=True, kw_only=True, tag="step.recorded.v1"):
    """Execution ``generation`` of a run recorded the step at ``call``, on the subject of that
    run's generation in a step stream (docs/aggregates/run.md#steps). ``steps`` holds every step
    this generation recorded so far, ``call``'s included: the last message of the subject is the
    generation's whole record, and the first record of a call is the one every execution gets."""

    run_id: str
    generation: int
    call: int
    step: StepResult
    steps: dict[str, StepResult]
    recorded_at: datetime
    resume_id: str | None = None


class StepsClosed(msgspec.Struct, frozen=True, kw_only=True, tag="step.closed.v1"):
    """The run was cancelled while execution ``generation`` ran: its step record takes no more
    steps (docs/aggregates/run.md#steps). Appended after ``run.cancelled`` on the generation's
    step subject, so a step recorded against the record as it was loses its append, reads the
    run again and finds it cancelled. ``steps`` repeats the record it closes."""

    run_id: str
    generation: int
    steps: dict[str, StepResult] = {}
    closed_at: datetime


class RunCancelled(msgspec.Struct, frozen=True, kw_only=True, tag="run.cancelled.v1"):
    """A person cancelled the run; a running execution stops at its next step, park or end."""

    run_id: str
    generation: int
    by: str
    cancelled_at: datetime
    was: Literal["running", "parked"]
    asks: list[str] = []
    """A parked run's questions (interaction ids): removed from the inbox with the run."""
    visits: list[str] = []
    """Visits that were waiting on the cancelled execution: each is told the run failed."""


class MessageFields(msgspec.Struct, frozen=True, kw_only=True):
    """What every record of a chat message that answered nothing holds: the event's and the
    messages door's frame's (docs/doors/messages.md)."""

    message_id: str
    channel: str
    sender: str
    chat: str
    received_at: datetime
    reason: Literal["late", "mismatch", "unmatched"]


class ChannelMessageReceived(MessageFields, frozen=True, kw_only=True, tag="channel.message.v1"):
    """A person wrote on a chat channel and it answered nothing: a reply to a question that is
    gone, a bridged mismatch, or an ordinary message to the bot (docs/channels.md#inbound-messages).
    Recorded on the messages stream so no reply is lost; readers follow it on the messages door.

    ``reason``: ``late`` (the question it replied to is answered, expired or removed),
    ``mismatch`` (the question refused it and bridges mismatches), ``unmatched`` (it referred to no
    question we know). ``audience`` is the question's (a restricted identity sees only replies to
    what it asked; a message about no question is for unrestricted readers only)."""

    text: str | None = None
    value: Any = None
    """A structured submission (a form's values) instead of text."""
    sender_name: str | None = None
    interaction_id: str | None = None
    audience: str | None = None
    params: dict[str, Any] | None = None
    notification_id: str | None = None
    """The notification this message replies to: a tap on one of its options or a submission of
    its ask-less form (docs/notifications.md#what-you-can-do)."""


class InteractionSettled(msgspec.Struct, frozen=True, kw_only=True, tag="interaction.settled.v1"):
    """A resumed caller ask's run chain reached its next outcome (docs/caller-asks.md#waiting-outcomes):
    ``finished``/``failed`` leave a waiting outcome on the subject until it is taken or dropped;
    ``parked`` (the chain parked again) ends the entry."""

    interaction_id: str
    group_id: str
    outcome: Literal["finished", "failed", "parked"]
    result: Any = None
    error: str | None = None
    run_id: str | None = None
    subject: str | None = None
    visit: str | None = None
    settled_at: datetime


class InteractionTaken(msgspec.Struct, frozen=True, kw_only=True, tag="interaction.taken.v1"):
    """A waiting outcome was taken by a subject's owner (a door visit or a run's generic tool)."""

    interaction_id: str
    group_id: str
    by: str
    visit: str | None = None
    taken_at: datetime


class SubjectIndexed(msgspec.Struct, frozen=True, kw_only=True, tag="subject.index.v1"):
    """The ids of every parked entry on a subject, as of this change (each change appends the whole
    list, expecting the previous one's sequence)."""

    subject: str
    ids: list[str]
    changed_at: datetime


class DoorSaved(msgspec.Struct, frozen=True, kw_only=True, tag="door.saved.v1"):
    name: str
    spec: DoorSpec
    by: str
    saved_at: datetime


class DoorDeleted(msgspec.Struct, frozen=True, kw_only=True, tag="door.deleted.v1"):
    name: str
    by: str
    deleted_at: datetime


class ScheduleFired(msgspec.Struct, frozen=True, kw_only=True, tag="door.fired.v1"):
    """One tick of a schedule, appended expecting the previous tick's sequence: across sweeper
    replicas exactly one fires each tick."""

    name: str
    tick: datetime
    visit_id: str
    fired_at: datetime


class VisitRecorded(msgspec.Struct, frozen=True, kw_only=True, tag="visit.recorded.v1"):
    """What one visit of a door (or a run's generic tool) did: its cancels, then its one action."""

    visit_id: str
    door: str | None = None
    kind: Literal["hook", "schedule", "conversation", "tool"]
    subject: str
    by: str
    cancelled: list[str] = []
    action: Literal["resume", "take", "start", "none"] = "none"
    resumed: list[str] = []
    taken: list[Taken] = []
    run_id: str | None = None
    visited_at: datetime
    error: str | None = None
    """Why the visit was refused (a door program that failed or yielded a wrong shape, an entry
    gone): recorded, and the visit did nothing."""
    channel: str | None = None
    """A conversation visit made by a chat message: the chat channel it came from ..."""
    chat: str | None = None
    """... and the provider's id of the chat, where its replies are posted (docs/doors/hooks.md)."""


class VisitSettled(msgspec.Struct, frozen=True, kw_only=True, tag="visit.settled.v1"):
    """The next outcome of what a visit resumed or started."""

    visit_id: str
    outcome: Outcome
    settled_at: datetime


class ConversationReplied(msgspec.Struct, frozen=True, kw_only=True, tag="conversation.reply.v1"):
    """A conversation's receiver was told an outcome of a run its route resumed or started."""

    subject: str
    visit_id: str | None = None
    run_id: str | None = None
    outcome: Outcome
    replied_at: datetime
    channel: str | None = None
    """The chat channel the conversation's visit came from (None: not from a chat) ..."""
    chat: str | None = None
    """... and the chat the delivery service posts this reply into (docs/doors/hooks.md)."""


InteractionEvent = InteractionAsked | InteractionAnswered | InteractionRemoved | InteractionRouted
CallerEvent = InteractionSettled | InteractionTaken
DoorEvent = DoorSaved | DoorDeleted
RunEvent = RunStarted | RunParked | RunResumed | RunFinished | RunFailed | RunStepRecorded | RunCancelled
Event = (
    InteractionAsked
    | InteractionAnswered
    | InteractionRemoved
    | InteractionRouted
    | InteractionWithdrawn
    | RunEvent
    | StepRecorded
    | StepsClosed
    | ChannelMessageReceived
    | InteractionSettled
    | InteractionTaken
    | SubjectIndexed
    | DoorSaved
    | DoorDeleted
    | ScheduleFired
    | VisitRecorded
    | VisitSettled
    | ConversationReplied
)

EXPIRY_ANSWER: dict[str, bool] = {"layby:interaction_expired": True}
"""The reserved marker an expired ask contributes in place of an answer
(docs/aggregates/interaction.md#expiry-of-async-parks, docs/aggregates/interaction.md#reserved-values)."""
EXPIRY_ANSWERER = ANSWERED_BY_EXPIRY
EXPIRY_KEY = "layby:interaction_expired"
CALLER_ASKS_KEY = "layby:caller_asks"
"""The reserved key of what ``layby.call`` returns when the called run asks its caller
(docs/caller-asks.md#runs-that-call-runs)."""

EVENT_DECODER: msgspec.json.Decoder[Event] = msgspec.json.Decoder(Event)
ENCODER = msgspec.json.Encoder()


def encode_event(event: Event) -> bytes:
    return ENCODER.encode(event)


def decode_event(data: bytes) -> Event:
    """Decode one log message; raises ``msgspec.ValidationError``/``DecodeError`` when malformed."""
    return EVENT_DECODER.decode(data)
