"""The PostgreSQL projector (docs/engineering.md#the-event-log-is-the-source-of-truth,
docs/engineering.md#exactly-once-effects).

Applies events to the read models. Each batch is one transaction that also records the
stream sequence it applied, so a replayed message is a no-op and the ack comes after commit.
Row updates are guarded by the per-row sequence and are order-insensitive, so replicas that
share the durable consumer may apply neighbouring batches in either order.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import asyncpg
import msgspec
import nats.errors
import nats.js.errors
from asyncpg.pool import PoolConnectionProxy
from nats.js.api import ConsumerConfig, DeliverPolicy

from layby_contracts import events
from layby_contracts.errors import Permanent, Transient
from layby_domain.frames import add_frame
from layby_domain.routing import next_due_at, offered_at_first
from layby_server.observability.logs import get_logger
from layby_server.projection.caller_slots import CallerSlots
from layby_server.projection.db import recreate_projection_tables
from layby_server.projection.projection_parked import parked_changes
from layby_server.settings import WAITING_OUTCOME_RETENTION_SECONDS
from layby_server.store.consumer import pause
from layby_server.store.eventstore import EventStore, Stored
from layby_server.write.doors import apply_door_rows, door_rows

log = get_logger("layby_server.projection.projector")
if TYPE_CHECKING:
    Conn = asyncpg.Connection[Any] | PoolConnectionProxy[Any]
_json = msgspec.json.Encoder()
INBOX = "inbox"
REBUILD_LOCK = 0x1A7B7_0002

_ASKED = """
INSERT INTO interactions AS t (interaction_id, group_id, status, answer_format, mode, audience, asked_by,
    sensitive, created_at, timeout_at, item, asked_seq, last_seq, run_id, route_at, offered)
VALUES ($1, $2, 'pending', $3, $4, $5, $6, $7, $8, $9, $10::json, $11, $11, $12, $13, $14)
ON CONFLICT (interaction_id) DO UPDATE SET
    answer_format = EXCLUDED.answer_format, mode = EXCLUDED.mode, asked_by = EXCLUDED.asked_by,
    run_id = EXCLUDED.run_id,
    sensitive = EXCLUDED.sensitive, created_at = EXCLUDED.created_at, timeout_at = EXCLUDED.timeout_at,
    item = EXCLUDED.item, asked_seq = EXCLUDED.asked_seq, audience = EXCLUDED.audience,
    route_at = CASE WHEN t.routed_seq IS NULL THEN EXCLUDED.route_at ELSE t.route_at END,
    offered = CASE WHEN t.routed_seq IS NULL THEN EXCLUDED.offered ELSE t.offered END
WHERE t.asked_seq IS NULL
"""

# A routing step (docs/routing.md): applied when newer than the last one applied; a question
# already resolved keeps its status (the step only fills in who it was offered to and the votes).
_ROUTED = """
INSERT INTO interactions AS t (interaction_id, group_id, status, audience, offered, votes, route_at,
    routed_seq, last_seq)
VALUES ($1, $2, 'pending', $3, $4, $5::jsonb, $6, $7, $7)
ON CONFLICT (interaction_id) DO UPDATE SET
    offered = EXCLUDED.offered, votes = EXCLUDED.votes, route_at = EXCLUDED.route_at,
    routed_seq = EXCLUDED.routed_seq
WHERE t.routed_seq IS NULL OR t.routed_seq < EXCLUDED.routed_seq
"""

_ANSWERED = """
INSERT INTO interactions AS t (interaction_id, group_id, status, audience, answered_by, answered_at, answer,
    last_seq, via)
VALUES ($1, $2, 'answered', $3, $4, $5, $6::jsonb, $7, $8)
ON CONFLICT (interaction_id) DO UPDATE SET
    status = 'answered', answered_by = EXCLUDED.answered_by, answered_at = EXCLUDED.answered_at,
    answer = EXCLUDED.answer, last_seq = EXCLUDED.last_seq, via = EXCLUDED.via
WHERE t.last_seq < EXCLUDED.last_seq
"""

_REMOVED = """
INSERT INTO interactions AS t (interaction_id, group_id, status, audience, removed_reason, removed_at,
    last_seq)
VALUES ($1, $2, 'removed', $3, $4, $5, $6)
ON CONFLICT (interaction_id) DO UPDATE SET
    status = 'removed', removed_reason = EXCLUDED.removed_reason, removed_at = EXCLUDED.removed_at,
    last_seq = EXCLUDED.last_seq
WHERE t.last_seq < EXCLUDED.last_seq
"""


def _guarded(columns: tuple[str, ...], seq: str) -> str:
    """SET clauses that take the event's values only when it is newer than what the row's
    ``seq`` column says was applied for those columns: the result is the same in any order."""
    return ",\n    ".join(
        f"{c} = CASE WHEN r.{seq} IS NULL OR r.{seq} < EXCLUDED.{seq} THEN EXCLUDED.{c} ELSE r.{c} END"
        for c in columns
    )


_STATUS = ("status", "generation", "resume_id", "updated_at")
_VERSION = (
    _guarded(("version",), "version_seq")
    + ",\n    version_seq = GREATEST(r.version_seq, EXCLUDED.version_seq)"
)
"""The run's flow version: that of the newest event that carries one (a finish carries none)."""

_RUN_STARTED = f"""
INSERT INTO runs AS r (run_id, flow, identity, status, input, created_at, updated_at, last_seq, version,
    version_seq)
VALUES ($1, $2, $3, 'running', $4::jsonb, $5, $5, $6, $7, $6)
ON CONFLICT (run_id) DO UPDATE SET
    flow = EXCLUDED.flow, identity = EXCLUDED.identity, input = EXCLUDED.input,
    created_at = EXCLUDED.created_at,
    {_VERSION}
"""  # noqa: S608 - built from constant column names

# Each aspect of a run row has its own sequence guard: the current park's asks (parked_seq), the
# checkpoint (checkpoint_seq) and the status (last_seq). An event sets only what it determines.
_RUN_PARKED = f"""
INSERT INTO runs AS r (run_id, status, generation, resume_id, updated_at, last_seq, checkpoint,
    checkpoint_seq, asks, expiry_at, parked_seq, step_count, version, version_seq)
VALUES ($1, 'parked', $2, $6, $7, $8, $3::jsonb, $8, $4::jsonb, $5, $8, $9, $10, $8)
ON CONFLICT (run_id) DO UPDATE SET
    step_count = GREATEST(r.step_count, EXCLUDED.step_count),
    {_guarded(("asks", "expiry_at"), "parked_seq")},
    {_guarded(("checkpoint",), "checkpoint_seq")},
    {_guarded(_STATUS, "last_seq")},
    {_VERSION},
    parked_seq = GREATEST(r.parked_seq, EXCLUDED.parked_seq),
    checkpoint_seq = GREATEST(r.checkpoint_seq, EXCLUDED.checkpoint_seq),
    last_seq = GREATEST(r.last_seq, EXCLUDED.last_seq)
"""  # noqa: S608 - built from constant column names

_RUN_RESUMED = f"""
INSERT INTO runs AS r (run_id, status, generation, resume_id, updated_at, last_seq, checkpoint,
    checkpoint_seq, retried_by, step_count, version, version_seq)
VALUES ($1, 'resumed', $2, $3, $4, $5, $6::jsonb, $5, $7, $8, $9, $5)
ON CONFLICT (run_id) DO UPDATE SET
    step_count = GREATEST(r.step_count, EXCLUDED.step_count),
    {_guarded(("checkpoint",), "checkpoint_seq")},
    {_guarded(_STATUS, "last_seq")},
    {_VERSION},
    retried_by = coalesce(EXCLUDED.retried_by, r.retried_by),
    checkpoint_seq = GREATEST(r.checkpoint_seq, EXCLUDED.checkpoint_seq),
    last_seq = GREATEST(r.last_seq, EXCLUDED.last_seq)
"""  # noqa: S608 - built from constant column names

_RUN_ENDED = f"""
INSERT INTO runs AS r (run_id, status, generation, resume_id, updated_at, last_seq, result, error,
    step_count, version, version_seq)
VALUES ($1, $2, $3, $8, $6, $7, $4::jsonb, $5, $9, $10, $11)
ON CONFLICT (run_id) DO UPDATE SET
    step_count = GREATEST(r.step_count, EXCLUDED.step_count),
    {_VERSION},
    {_guarded(("result", "error", *_STATUS), "last_seq")},
    last_seq = GREATEST(r.last_seq, EXCLUDED.last_seq)
"""  # noqa: S608 - built from constant column names

_RUN_STEP = """
INSERT INTO runs AS r (run_id, status, generation, updated_at, last_seq, step_count)
VALUES ($1, 'running', $2, $3, $4, $5)
ON CONFLICT (run_id) DO UPDATE SET
    step_count = GREATEST(r.step_count, EXCLUDED.step_count),
    updated_at = CASE WHEN r.last_seq < EXCLUDED.last_seq THEN EXCLUDED.updated_at ELSE r.updated_at END,
    last_seq = GREATEST(r.last_seq, EXCLUDED.last_seq)
"""

_RUN_CANCELLED = f"""
INSERT INTO runs AS r (run_id, status, generation, updated_at, last_seq, cancelled_by)
VALUES ($1, 'cancelled', $2, $3, $4, $5)
ON CONFLICT (run_id) DO UPDATE SET
    {_guarded(("cancelled_by", *_STATUS), "last_seq")},
    last_seq = GREATEST(r.last_seq, EXCLUDED.last_seq)
"""  # noqa: S608 - built from constant column names

_CHECKPOINT = """
INSERT INTO projector_checkpoints AS c (name, seq) VALUES ($1, $2)
ON CONFLICT (name) DO UPDATE SET seq = GREATEST(c.seq, EXCLUDED.seq)
"""


def _json_or_null(value: Any) -> str | None:
    return None if value is None else _json.encode(value).decode()


# One row builder per projected event type: the row of its statement's parameters, in the
# statement's order. Each is called once per event and allocates only its row.
Row = tuple[Any, ...]


def _asked_row(ev: events.InteractionAsked, seq: int) -> Row:
    return (
        ev.interaction_id,
        ev.group_id,
        ev.answer_format,
        ev.mode,
        ev.audience,
        ev.asked_by,
        ev.sensitive,
        ev.created_at,
        ev.timeout_at,
        _json.encode(add_frame(ev)).decode(),
        seq,
        ev.run_id,
        next_due_at(ev, None),
        offered_at_first(ev),
    )


def _answered_row(ev: events.InteractionAnswered, seq: int) -> Row:
    answer = None if ev.sensitive else _json_or_null(ev.answer)
    return (ev.interaction_id, ev.group_id, ev.audience, ev.answered_by, ev.answered_at, answer, seq, ev.via)


def _removed_row(ev: events.InteractionRemoved, seq: int) -> Row:
    return (ev.interaction_id, ev.group_id, ev.audience, ev.reason, ev.removed_at, seq)


def _routed_row(ev: events.InteractionRouted, seq: int) -> Row:
    progress = ev.progress
    votes = (
        _json.encode([{"by": v.by, "at": v.at} for v in progress.votes]).decode() if progress.votes else None
    )
    return (ev.interaction_id, ev.group_id, ev.audience, progress.offered or None, votes, ev.next_at, seq)


def _run_started_row(ev: events.RunStarted, seq: int) -> Row:
    return (ev.run_id, ev.flow, ev.identity, _json_or_null(ev.input), ev.started_at, seq, ev.version)


def _run_parked_row(ev: events.RunParked, seq: int) -> Row:
    return (
        ev.run_id,
        ev.generation,
        _json.encode(ev.answers).decode(),
        _json.encode(ev.asks).decode(),
        min((a.expiry_at for a in ev.asks if a.expiry_at is not None), default=None),
        ev.resume_id,
        ev.parked_at,
        seq,
        len(ev.steps),
        ev.version,
    )


def _run_resumed_row(ev: events.RunResumed, seq: int) -> Row:
    answers = _json.encode(ev.answers).decode()
    return (
        ev.run_id,
        ev.generation,
        ev.resume_id,
        ev.resumed_at,
        seq,
        answers,
        ev.retried_by,
        len(ev.steps),
        ev.version,
    )


def _run_finished_row(ev: events.RunFinished, seq: int) -> Row:
    result = _json_or_null(ev.result)
    return (
        ev.run_id,
        "finished",
        ev.generation,
        result,
        None,
        ev.finished_at,
        seq,
        ev.resume_id,
        ev.step_count,
        None,  # a finish carries no version: the run's stays as it was
        None,
    )


def _run_failed_row(ev: events.RunFailed, seq: int) -> Row:
    steps = len(ev.steps)
    return (
        ev.run_id,
        "failed",
        ev.generation,
        None,
        ev.error,
        ev.failed_at,
        seq,
        ev.resume_id,
        steps,
        ev.version,
        seq,
    )


def _run_step_row(
    ev: events.RunStepRecorded, seq: int
) -> Row:  # written before steps moved to the step streams
    return (ev.run_id, ev.generation, ev.recorded_at, seq, len(ev.steps))


def _run_cancelled_row(ev: events.RunCancelled, seq: int) -> Row:
    return (ev.run_id, ev.generation, ev.cancelled_at, seq, ev.by)


_RESOLVED = "DELETE FROM admissions WHERE interaction_id = $1"


class _Projection(NamedTuple):
    """What one event type contributes: a row of ``statement``, and whether it resolves its
    question (its admission is released in the same transaction)."""

    statement: str
    row: Callable[[Any, int], Row]
    resolves: bool = False


_PROJECTIONS: dict[type[events.Event], _Projection] = {
    events.InteractionAsked: _Projection(_ASKED, _asked_row),
    events.InteractionAnswered: _Projection(_ANSWERED, _answered_row, resolves=True),
    events.InteractionRemoved: _Projection(_REMOVED, _removed_row, resolves=True),
    events.InteractionRouted: _Projection(_ROUTED, _routed_row),
    events.RunStarted: _Projection(_RUN_STARTED, _run_started_row),
    events.RunParked: _Projection(_RUN_PARKED, _run_parked_row),
    events.RunResumed: _Projection(_RUN_RESUMED, _run_resumed_row),
    events.RunFinished: _Projection(_RUN_ENDED, _run_finished_row),
    events.RunFailed: _Projection(_RUN_ENDED, _run_failed_row),
    events.RunStepRecorded: _Projection(_RUN_STEP, _run_step_row),
    events.RunCancelled: _Projection(_RUN_CANCELLED, _run_cancelled_row),
}
"""Every event type with a row in the inbox or runs read models; the others have none here."""

# The order the statements run in: the inbox's before the caller pool's changes, the runs'
# after (each statement is order-insensitive within itself).
_INBOX_STATEMENTS = (_ASKED, _ROUTED, _ANSWERED, _REMOVED, _RESOLVED)
_RUN_STATEMENTS = (_RUN_STARTED, _RUN_PARKED, _RUN_RESUMED, _RUN_ENDED, _RUN_STEP, _RUN_CANCELLED)


async def apply_batch(
    conn: Conn,
    batch: Sequence[Stored],
    *,
    name: str = INBOX,
    waiting_retention: float = WAITING_OUTCOME_RETENTION_SECONDS,
) -> None:
    """Apply events in one transaction with the checkpoint; idempotent by stream sequence.
    ``waiting_retention``: ``LAYBY_WAITING_OUTCOME_RETENTION``, how long a caller slot outlives
    the event that keeps it."""
    caller = CallerSlots(waiting_retention)
    rows: dict[str, list[Row]] = {statement: [] for statement in (*_INBOX_STATEMENTS, *_RUN_STATEMENTS)}
    resolved = rows[_RESOLVED]
    for stored in batch:
        ev = stored.event
        if caller.take(ev):
            continue  # a caller ask's event: its slot only, never an inbox row
        projection = _PROJECTIONS.get(type(ev))
        if projection is None:
            continue
        rows[projection.statement].append(projection.row(ev, stored.seq))
        if projection.resolves:
            resolved.append((ev.interaction_id,))  # type: ignore[union-attr] # only questions resolve
    doors = door_rows(batch)
    async with conn.transaction():
        await apply_door_rows(conn, doors)
        await _execute(conn, rows, _INBOX_STATEMENTS)
        await caller.apply(conn)
        await _execute(conn, rows, _RUN_STATEMENTS)
        # After the runs: a run's resolved caller asks update its row (a rebuild may bring the
        # run's start in the same batch).
        for sql, changes in parked_changes(batch):
            await conn.executemany(sql, changes)
        if batch:
            await conn.execute(_CHECKPOINT, name, max(s.seq for s in batch))


async def _execute(conn: Conn, rows: dict[str, list[Row]], statements: tuple[str, ...]) -> None:
    for statement in statements:
        if rows[statement]:
            await conn.executemany(statement, rows[statement])


def _untraced(_event: events.Event) -> bool:
    return False


async def read_range(store: EventStore, first: int, last: int, *, batch: int = 1000) -> list[Stored]:
    """Every interaction event with ``first <= seq <= last``, read through an ordered consumer."""
    out: list[Stored] = []
    if last < first:
        return out
    sub = await store.js.subscribe(
        store.names.events_all,
        ordered_consumer=True,
        config=ConsumerConfig(deliver_policy=DeliverPolicy.BY_START_SEQUENCE, opt_start_seq=first),
        pending_msgs_limit=batch * 10,
    )
    try:
        while True:
            try:
                msg = await sub.next_msg(timeout=10)
            except nats.errors.TimeoutError:
                # Every message of the log is an event: a replay that stops short
                # of ``last`` is a failure, never a silently shorter projection.
                reached = out[-1].seq if out else first - 1
                raise Transient(f"replay stalled at sequence {reached} before {last}") from None
            seq = msg.metadata.sequence.stream
            if seq > last:
                break
            try:
                out.append(Stored(seq=seq, event=events.decode_event(msg.data)))
            except (msgspec.DecodeError, msgspec.ValidationError) as exc:
                raise Permanent(f"event {seq} cannot be decoded: {exc}") from None
            if seq == last:
                break
    finally:
        await sub.unsubscribe()
    return out


async def rebuild(
    pool: asyncpg.Pool, store: EventStore, *, waiting_retention: float = WAITING_OUTCOME_RETENTION_SECONDS
) -> int:
    """Drop the projection tables and replay the whole log into them, in one transaction.

    Returns the number of events applied. Once the tables are dropped, the live projector cannot
    commit until this transaction does; so after the replay the log's end is read again and the
    events that the live projector committed to the old tables meanwhile are applied too. The
    live projector then skips what the rebuild already applied (row sequence guards).
    """
    first, last = await store.bounds()
    stored = await read_range(store, max(first, 1), last)
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock($1)", REBUILD_LOCK)
        await recreate_projection_tables(conn)
        for start in range(0, len(stored), 1000):
            await apply_batch(conn, stored[start : start + 1000], waiting_retention=waiting_retention)
        _, newer = await store.bounds()
        if newer > last:
            late = await read_range(store, last + 1, newer)
            await apply_batch(conn, late, waiting_retention=waiting_retention)
            stored.extend(late)
            last = newer
        if last:
            await conn.execute(_CHECKPOINT, INBOX, last)
        # Reservations of questions that resolved are released; open ones stay counted.
        await conn.execute(
            "DELETE FROM admissions a USING interactions i "
            "WHERE a.interaction_id = i.interaction_id AND i.status <> 'pending'"
        )
    log.info("projections.rebuilt", events=len(stored), last_seq=last)
    return len(stored)


SETTLE_SECONDS = 5.0
"""How long a would-be refusal at a cap waits for the projector to apply what the log holds."""


async def projected_through(
    pool: asyncpg.Pool, store: EventStore, *, within: float = SETTLE_SECONDS, poll: float = 0.02
) -> bool:
    """Whether the read models hold every event the log held when this was asked, waiting up to
    ``within`` seconds for the live projector to get there.

    Two watermarks must both reach the log's last sequence: the projector's checkpoint (the
    highest sequence it applied) and its consumer's acknowledgement floor (every sequence up to
    it applied). The checkpoint alone can stand past a gap: a batch lost in flight when the
    consumer's leader died comes back only after its ack wait, while later batches are applied
    (docs/reliability.md#refusals-under-faults). Without a projector consumer (a rebuild, a
    test) the checkpoint decides."""
    _, last = await store.bounds()
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while True:
        seq = await pool.fetchval("SELECT seq FROM projector_checkpoints WHERE name = $1", INBOX)
        if int(seq or 0) >= last and await _acknowledged_through(store, last):
            return True
        if loop.time() >= deadline:
            return False
        await asyncio.sleep(poll)


async def _acknowledged_through(store: EventStore, last: int) -> bool:
    try:
        info = await store.js.consumer_info(
            store.names.events_stream, store.names.durable("projector"), timeout=1.0
        )
    except nats.js.errors.NotFoundError:
        return True
    except (nats.errors.Error, TimeoutError):
        return False  # its leader is being elected: not known to be current yet
    floor = int(info.ack_floor.stream_seq) if info.ack_floor and info.ack_floor.stream_seq else 0
    return floor >= last


PROJECTOR_LOCK = 0x1A7B7
"""The advisory lock class one live projector per schema holds (the other key is the schema)."""
STANDBY_SECONDS = 2.0
LOCK_CHECK_SECONDS = 5.0
"""A batch the lock connection has not committed within this is taken for a lost lock (the
projector steps down, and the batch is redelivered)."""


async def run_projector(
    pool: asyncpg.Pool,
    store: EventStore,
    stop: asyncio.Event,
    *,
    observe: Callable[[list[Stored]], None] | None = None,
    standby: float = STANDBY_SECONDS,
    waiting_retention: float = WAITING_OUTCOME_RETENTION_SECONDS,
) -> None:
    """The live projector: one per schema at a time (docs/architecture.md#one-projector-at-a-time).

    Every replica of the host service runs this; the one holding the schema's advisory lock
    consumes the log (a durable pull consumer, so a successor resumes where it stopped) and the
    others stand by, trying again every ``standby`` seconds. One projector applies the log in
    order, so its checkpoint is a true watermark: everything up to it is in the tables, which is
    what the list door's ``after=`` relies on. The lock lives on its own connection: if that
    connection is lost the lock goes with it, and this projector stops before another takes over
    (each batch is applied on that very connection, so none commits without the lock).

    ``observe`` sees each batch after it committed (the door keeps its asked-event cache with it).
    """
    while not stop.is_set():
        try:
            conn = await pool.acquire()
        except (OSError, asyncpg.PostgresError) as exc:
            log.warning("projector.no_database", error=str(exc))
            await pause(stop, standby)
            continue
        try:
            held = await conn.fetchval(
                "SELECT pg_try_advisory_lock($1, hashtext(current_schema()))", PROJECTOR_LOCK
            )
            if held:
                log.info("projector.leading")
                try:
                    await _project(store, stop, conn, observe, waiting_retention=waiting_retention)
                finally:
                    try:
                        await conn.execute(
                            "SELECT pg_advisory_unlock($1, hashtext(current_schema()))", PROJECTOR_LOCK
                        )
                    except BaseException:
                        # The pool hands connections out again without resetting their session
                        # (db.py): one that may still hold the lock is closed, never pooled.
                        conn.terminate()
                        raise
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, _LockLost) as exc:
            log.warning("projector.stepped_down", error=str(exc))
        finally:
            with contextlib.suppress(asyncpg.InterfaceError):
                await pool.release(conn)  # a lost connection has left the pool already
        await pause(stop, standby)


class _LockLost(Exception):
    """The connection holding the projector lock is gone: another replica may project now."""


async def _project(
    store: EventStore,
    stop: asyncio.Event,
    lock: Any,
    observe: Callable[[list[Stored]], None] | None,
    *,
    waiting_retention: float,
) -> None:
    from layby_server.store.consumer import consume

    leading = asyncio.Event()  # set to stop consuming: the service stops, or the lock is lost
    lost: list[str] = []

    async def handle(batch: list[Stored]) -> None:
        # Applied on the connection that holds the lock: a batch commits only while the lock is
        # held (a lost connection takes the lock and the batch's transaction with it), with no
        # separate check and no second connection per batch.
        try:
            await asyncio.wait_for(
                apply_batch(lock, batch, waiting_retention=waiting_retention), LOCK_CHECK_SECONDS
            )
        except (OSError, TimeoutError, asyncpg.InterfaceError, asyncpg.PostgresConnectionError) as exc:
            lost.append(f"{type(exc).__name__}: {exc}")
            leading.set()
            raise Transient(f"the projector lock is lost: {exc}") from None  # the batch is redelivered
        if observe is not None:
            observe(batch)

    async def follow_stop() -> None:
        await stop.wait()
        leading.set()

    follower = asyncio.create_task(follow_stop())
    try:
        # No spans: the read models are not a step of any question's path (docs/tracing.md#cost).
        await consume(
            store,
            role="projector",
            handler=handle,
            stop=leading,
            deliver_all=True,
            linger=0.005,
            traced=_untraced,
        )
    finally:
        follower.cancel()
    if lost:
        raise _LockLost(lost[0])
