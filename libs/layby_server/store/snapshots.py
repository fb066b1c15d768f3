"""JetStream's own stream snapshot and restore, on plain NATS requests
(docs/decisions/0025-backup-and-restore.md).

nats-py has no helper for these two API calls, so this module speaks them directly. Both exist
on NATS 2.9 and on the newer server the tests pin, and both keep what re-publishing would lose:
every message keeps its stream sequence (SSE ids and projection checkpoints are stream
sequences), the gaps left by deleted or expired messages stay gaps, and the stream's durable
consumers come back with the position they had.

- **Snapshot**: a request to ``$JS.API.STREAM.SNAPSHOT.<stream>`` names a subject to deliver
  to; the server answers with the stream's configuration and state, then sends the snapshot (an
  opaque archive) in chunks. Some chunks carry a reply subject: answering it is the flow
  control (the server stops sending when the client falls behind). An empty message ends the
  snapshot; a status header other than 204 on it is the server's error.
- **Restore**: a request to ``$JS.API.STREAM.RESTORE.<stream>`` with the configuration and state
  returns a subject; each chunk is a request to it (an answer with a body is an error), and an
  empty request ends the upload. Its answer is the stream-create response of the restored stream.
  The stream must not exist.
"""

from __future__ import annotations

import asyncio
import json
from typing import IO, Any

import nats.errors
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg

__all__ = ["SnapshotError", "restore_stream", "snapshot_stream"]

CHUNK_SIZE = 128 * 1024
"""Bytes per chunk, both ways (the server keeps a snapshot's chunks between 1 KiB and 1 MiB)."""
IDLE_TIMEOUT = 30.0
"""A snapshot that sends nothing for this long has failed (the server gave up on it)."""
API_TIMEOUT = 10.0
FINISH_TIMEOUT = 600.0
"""The server rebuilds the stream from the uploaded archive before it answers the last request."""


class SnapshotError(Exception):
    """The server refused or broke off a snapshot or a restore; the message says which and why."""


def _api_error(stream: str, what: str, body: dict[str, Any]) -> SnapshotError | None:
    error = body.get("error")
    if not error:
        return None
    return SnapshotError(
        f"{what} of {stream} refused by the server: {error.get('description', error)} "
        f"(code {error.get('code')}, error {error.get('err_code')})"
    )


async def _api(nc: NATS, subject: str, request: dict[str, Any]) -> dict[str, Any]:
    reply = await nc.request(subject, json.dumps(request).encode(), timeout=API_TIMEOUT)
    body: dict[str, Any] = json.loads(reply.data or b"{}")
    return body


async def snapshot_stream(
    nc: NATS, stream: str, out: IO[bytes], *, chunk_size: int = CHUNK_SIZE, idle_timeout: float = IDLE_TIMEOUT
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Write a snapshot of ``stream`` (with its consumers) to ``out``; its (config, state).

    The state is the stream's at the moment the snapshot was taken: the snapshot of one stream
    is consistent, while the stream goes on taking appends."""
    inbox = nc.new_inbox()
    queue: asyncio.Queue[Msg] = asyncio.Queue()

    async def take(msg: Msg) -> None:
        await queue.put(msg)

    sub = await nc.subscribe(inbox, cb=take, pending_msgs_limit=-1, pending_bytes_limit=-1)
    try:
        body = await _api(
            nc, f"$JS.API.STREAM.SNAPSHOT.{stream}", {"deliver_subject": inbox, "chunk_size": chunk_size}
        )
        refused = _api_error(stream, "the snapshot", body)
        if refused is not None:
            raise refused
        while True:
            try:
                msg = await asyncio.wait_for(queue.get(), idle_timeout)
            except TimeoutError:
                raise SnapshotError(
                    f"the snapshot of {stream} stalled: nothing arrived for {idle_timeout:g}s"
                ) from None
            if not msg.data:
                status = (msg.headers or {}).get("Status", "")
                if status and status != "204":
                    why = (msg.headers or {}).get("Description", "")
                    failed = f"the snapshot of {stream} failed on the server: {status} {why}"
                    raise SnapshotError(failed.strip())
                break
            if msg.reply:
                await nc.publish(msg.reply, b"")  # flow control: the chunk is taken, send more
            out.write(msg.data)
    finally:
        await sub.unsubscribe()
    return body["config"], body["state"]


async def restore_stream(
    nc: NATS, stream: str, config: dict[str, Any], state: dict[str, Any], data: IO[bytes]
) -> dict[str, Any]:
    """Create ``stream`` from a snapshot (read from ``data``); the restored stream's state.
    Raises ``SnapshotError`` when the server refuses (the stream exists, say) or fails."""
    if config.get("name") != stream:
        raise SnapshotError(f"the snapshot of {config.get('name')} cannot be restored as {stream}")
    body = await _api(nc, f"$JS.API.STREAM.RESTORE.{stream}", {"config": config, "state": state})
    refused = _api_error(stream, "the restore", body)
    if refused is not None:
        raise refused
    upload = body["deliver_subject"]
    try:
        while chunk := data.read(CHUNK_SIZE):
            answer = await nc.request(upload, chunk, timeout=API_TIMEOUT)
            if answer.data:
                failed = _api_error(stream, "the restore", json.loads(answer.data))
                raise failed or SnapshotError(f"the restore of {stream} failed: {answer.data!r}")
        final = await nc.request(upload, b"", timeout=FINISH_TIMEOUT)
    except nats.errors.TimeoutError:
        raise SnapshotError(f"the restore of {stream} timed out: the server stopped answering") from None
    created: dict[str, Any] = json.loads(final.data or b"{}")
    failed = _api_error(stream, "the restore", created)
    if failed is not None:
        raise failed
    restored: dict[str, Any] = created.get("state", {})
    return restored
