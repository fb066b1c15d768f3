"""Benchmark: how fast one JetStream server takes fsynced appends, by how many are in flight and
over how many streams (the fsync ceiling, docs/performance.md#the-fsync-ceiling).

    python bench/appends.py [--seconds 5] [--inflight 1 10 100] [--streams 1 4]

Starts its own NATS (the pinned binary, `sync_interval: always`, and once more without it for
the bound) with no authorization, and publishes 300-byte messages, each to a subject of its own
as the event log does (one subject per interaction), with a fixed number in flight. Prints
appends/s and the time of one write+fsync of 300 bytes on the same disk.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from pathlib import Path

import nats

from layby_server.operations.embedded import EmbeddedNats


class Unsynced(EmbeddedNats):
    """NATS's default: acknowledged before fsync. Never shipped; measures fsync's share."""

    def _config(self) -> str:
        return super()._config().replace("  sync_interval: always\n", "")


def fsync_ms(directory: str, count: int = 500) -> float:
    fd, path = tempfile.mkstemp(dir=directory)
    try:
        started = time.perf_counter()
        for _ in range(count):
            os.write(fd, b"x" * 300)
            os.fsync(fd)
        return (time.perf_counter() - started) / count * 1000
    finally:
        os.close(fd)
        os.unlink(path)


async def rate(url: str, streams: int, inflight: int, seconds: float) -> float:
    nc = await nats.connect(url)
    js = nc.jetstream()
    names = [f"bench{i}" for i in range(streams)]
    for name in names:
        await js.add_stream(name=name, subjects=[f"{name}.>"])
    payload = b"y" * 300
    done = 0
    stop_at = time.perf_counter() + seconds

    async def one(worker: int) -> None:
        nonlocal done
        i = 0
        stream = names[worker % streams]
        while time.perf_counter() < stop_at:
            await js.publish(f"{stream}.{worker}.{i}", payload)
            i += 1
            done += 1

    started = time.perf_counter()
    await asyncio.gather(*(one(w) for w in range(inflight)))
    elapsed = time.perf_counter() - started
    for name in names:
        await js.delete_stream(name)
    await nc.close()
    return done / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--inflight", type=int, nargs="+", default=[1, 10, 100])
    parser.add_argument("--streams", type=int, nargs="+", default=[1, 4])
    args = parser.parse_args()
    rows = []
    for kind, label in ((EmbeddedNats, "fsync before ack (as shipped)"), (Unsynced, "no fsync (bound)")):
        with tempfile.TemporaryDirectory(prefix="layby-bench-appends-") as tmp:
            server = kind(Path(tmp)).start()
            try:
                for streams in args.streams:
                    for inflight in args.inflight:
                        rows.append(
                            (
                                label,
                                streams,
                                inflight,
                                asyncio.run(rate(server.url, streams, inflight, args.seconds)),
                            )
                        )
            finally:
                server.stop()
    with tempfile.TemporaryDirectory(prefix="layby-bench-appends-") as tmp:
        one_fsync = fsync_ms(tmp)
    serial = 1000 / one_fsync
    print(f"one write+fsync of 300 bytes on this disk: {one_fsync:.3f} ms (at most {serial:,.0f}/s in a row)")
    print()
    print("| NATS | streams | in flight | appends/s |")
    print("|---|---:|---:|---:|")
    for label, streams, inflight, per_second in rows:
        print(f"| {label} | {streams} | {inflight} | {per_second:,.0f} |")


if __name__ == "__main__":
    main()
