"""Benchmark: the sync ask→answer cycle through `layby up` ("How fast").

    python bench/sync_cycle.py [--seconds 10] [--concurrency 1 10 100] [--url URL --token T --nats URL]
                               [--without-nats-auth [--without-fsync]] [--tracing] [--format F] [--json PATH]

Without --url it starts `layby up` itself (embedded NATS and PostgreSQL, a temporary data dir),
measures its idle resident memory, then for each N runs N concurrent askers (the SDK's ask_user)
while one client reads the SSE stream and answers every question as its add frame arrives.
Prints a table: cycles/s, ask→add-frame p50/p99, answer-POST→ask_user-returns p50/p99, and the
CPU time `layby up`'s processes (services, NATS, PostgreSQL) spent per cycle.
``--without-nats-auth`` runs `layby up` on a NATS without authorization (a plain embedded server
it starts), to measure what NATS authorization costs (docs/performance.md). ``--without-fsync`` (with
``--without-nats-auth``) starts that NATS without ``sync_interval: always``, a setting Layby never
ships, to measure the bound fsync sets. ``--tracing`` runs
the services with tracing on at the default sampling, exporting over OTLP/HTTP to an endpoint
that discards every span, to measure what tracing costs (docs/tracing.md#cost). ``--format``
asks ``text`` (the default), ``confirm`` or ``review`` questions (a review accepted with the
hash its add frame shows: docs/review.md). ``--quorum K`` (K > 1) asks each question with
``routing={"required": K}`` and answers it with K votes from K identities, one after the other
(docs/routing.md#quorum): `layby up` then runs with K operator tokens of the bench's own.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import uvloop

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _http import Conn, sse
from _result import Result, add_json_option
from _up import add_level_options, add_system_options, load_level, pct, start_up, table_head, tree_rss_mb

from layby.sdk import connect
from layby_server.settings import load_settings


ACTION = {"name": "deploy", "arguments": {"service": "api", "version": "2.4.1", "replicas": 3}}
FORMATS: dict[str, tuple[dict[str, Any], Callable[[dict[str, Any]], object], Callable[[Any], bool]]] = {
    "text": ({}, lambda _: "ok", lambda answer: answer == "ok"),
    "confirm": ({"answer_format": "confirm"}, lambda _: True, lambda answer: answer is True),
    "review": (
        {"answer_format": "review", "action": ACTION},
        lambda item: {"decision": "accept", "arguments_sha256": item["format_payload"]["arguments_sha256"]},
        lambda answer: answer["decision"] == "accept",
    ),
}
"""What each ``--format`` asks with, answers with (from the add frame) and gets back: a review
is accepted with the hash its frame shows."""


async def run_level(
    url: str,
    token: str,
    nats_url: str,
    n: int,
    seconds: float,
    answerers: int = 8,
    server_pid: int | None = None,
    answer_format: str = "text",
    voters: list[str] | None = None,
) -> dict:
    ask_kwargs, answer_of, expected = FORMATS[answer_format]
    voters = voters or [token]
    if len(voters) > 1:
        ask_kwargs = {**ask_kwargs, "routing": {"required": len(voters)}}
    host, port = urlsplit(url).hostname or "127.0.0.1", urlsplit(url).port or 80
    settings = load_settings({}, max_concurrent=None)
    client = await connect(nats_url=nats_url, token=token, settings=settings)
    asked_at: dict[str, float] = {}
    posted_at: dict[str, float] = {}
    ask_to_add: list[float] = []
    answer_to_return: list[float] = []
    queue: asyncio.Queue[tuple[str, str, object]] = asyncio.Queue()
    stop = asyncio.Event()

    async def reader() -> None:
        async for frame in sse(host, port, token):
            if frame["event"] == "interaction.add":
                q = frame["data"]["question"]
                if q in asked_at:
                    ask_to_add.append(time.perf_counter() - asked_at[q])
                    await queue.put((frame["data"]["interaction_id"], q, answer_of(frame["data"])))

    async def answerer() -> None:
        # One keep-alive connection per voter: a quorum's votes come from different people.
        conns = [await Conn(host, port, voter).open() for voter in voters]
        try:
            while True:
                iid, q, answer = await queue.get()
                posted_at[q] = time.perf_counter()
                for conn in conns:
                    status, body = await conn.request(
                        "POST", f"/api/interactions/{iid}/answer", {"answer": answer}
                    )
                    if status != 200:
                        print("answer failed", status, body[:200], file=sys.stderr)
        finally:
            for conn in conns:
                await conn.close()

    cycles = 0

    async def asker(k: int) -> None:
        nonlocal cycles
        i = 0
        while not stop.is_set():
            q = f"bench-{n}-{k}-{i}"
            i += 1
            asked_at[q] = time.perf_counter()
            answer = await client.ask_user(q, timeout=60, **ask_kwargs)
            answer_to_return.append(time.perf_counter() - posted_at[q])
            assert expected(answer), answer
            cycles += 1

    tasks = [asyncio.create_task(reader())]
    tasks += [asyncio.create_task(answerer()) for _ in range(answerers)]
    await asyncio.sleep(0.5)  # the stream's start point is taken when it connects
    asked_at["bench-warmup"] = time.perf_counter()
    assert expected(await asyncio.wait_for(client.ask_user("bench-warmup", timeout=30, **ask_kwargs), 30))
    ask_to_add.clear()
    answer_to_return.clear()
    level = await load_level((asker(k) for k in range(n)), stop, seconds, server_pid, by_part=True)
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    await client.close()
    return {
        "n": n,
        "cycles": cycles,
        "rate": cycles / level.elapsed,
        "add_p50": pct(ask_to_add, 0.5),
        "add_p99": pct(ask_to_add, 0.99),
        "ret_p50": pct(answer_to_return, 0.5),
        "ret_p99": pct(answer_to_return, 0.99),
        "cpu_ms": level.cpu_ms(cycles),
        "split": level.split_ms(cycles),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_level_options(parser)
    add_system_options(parser)
    parser.add_argument("--answerers", type=int, default=8, help="keep-alive connections answering")
    parser.add_argument("--without-nats-auth", action="store_true", help="NATS without authorization")
    parser.add_argument(
        "--without-fsync",
        action="store_true",
        help="with --without-nats-auth: that NATS without sync_interval: always (the bound fsync sets)",
    )
    parser.add_argument("--tracing", action="store_true", help="tracing on, spans sent to a discarding sink")
    parser.add_argument(
        "--format",
        choices=sorted(FORMATS),
        default="text",
        help="the question's answer format (review: an action accepted with the hash its frame shows)",
    )
    parser.add_argument(
        "--quorum", type=int, default=1, help="K > 1: each question needs K agreeing votes from K identities"
    )
    add_json_option(parser)
    args = parser.parse_args()
    voters: list[str] | None = None

    up = None
    plain = None
    sink = None
    idle_mb = float("nan")
    url, token, nats_url = args.url, args.token, args.nats
    if not url:
        extra = {}
        if args.without_nats_auth:
            import tempfile

            from layby_server.operations.embedded import EmbeddedNats

            class Unsynced(EmbeddedNats):
                """NATS's default: acknowledged before fsync. Never shipped; measures fsync's share."""

                def _config(self) -> str:
                    return super()._config().replace("  sync_interval: always\n", "")

            kind = Unsynced if args.without_fsync else EmbeddedNats
            plain_dir = tempfile.TemporaryDirectory(prefix="layby-bench-nats-")
            plain = kind(Path(plain_dir.name)).start()
            extra["LAYBY_NATS_URL"] = plain.url
        if args.tracing:
            from _otlp_sink import start_sink

            extra["OTEL_EXPORTER_OTLP_ENDPOINT"], sink = start_sink()
        if args.quorum > 1:
            import secrets

            voters = [f"bench-{k}-{secrets.token_hex(16)}" for k in range(args.quorum)]
            extra["LAYBY_API_TOKENS"] = ",".join(f"{v}:voter{k}:operator" for k, v in enumerate(voters))
        up = start_up(**extra)
        url, token, nats_url = up.url, up.token, up.nats_url
        idle_mb = tree_rss_mb(up.proc.pid)
    try:
        # uvloop, like the services: the client shares the two cores and should cost little.
        results = [
            uvloop.run(
                run_level(
                    url,
                    token,
                    nats_url,
                    n,
                    args.seconds,
                    args.answerers,
                    up.proc.pid if up else None,
                    args.format,
                    voters,
                )
            )
            for n in args.concurrency
        ]
    finally:
        if up is not None:
            up.stop()
        if plain is not None:
            plain.stop()
        if sink is not None:
            sink.terminate()
    print()
    print(f"NATS authorization: {'off' if args.without_nats_auth else 'on'}")
    if args.without_nats_auth:
        synced = "no" if args.without_fsync else "yes (sync_interval: always)"
        print(f"NATS fsync before acknowledging: {synced}")
    print(f"tracing: {'on (OTLP to a discarding endpoint)' if args.tracing else 'off'}")
    print(f"answer format: {args.format}")
    print(f"votes per question: {args.quorum}")
    print(f"layby up idle resident memory (all processes): {idle_mb:.0f} MB")
    table_head(
        "| askers N | cycles | cycles/s | ask→add p50 | ask→add p99 | answer→return p50 | answer→return p99 "
        "| server CPU per cycle |",
        first="---:",
    )
    for r in results:
        print(
            f"| {r['n']} | {r['cycles']} | {r['rate']:.0f} | {r['add_p50']:.1f} ms | {r['add_p99']:.1f} ms "
            f"| {r['ret_p50']:.1f} ms | {r['ret_p99']:.1f} ms | {r['cpu_ms']:.2f} ms |"
        )
    parts = ["door", "ask", "delivery", "resume", "sweeper", "nats", "postgres"]
    if any(r["split"] for r in results):
        print()
        print("CPU per cycle by process (ms):")
        table_head("| askers N | " + " | ".join(parts) + " |", first="---:")
        for r in results:
            print(f"| {r['n']} | " + " | ".join(f"{r['split'].get(p, 0.0):.3f}" for p in parts) + " |")
    out = Result("sync_cycle")
    out.lower("idle memory, MB", idle_mb)
    for r in results:
        n = r["n"]
        out.higher(f"N={n} cycles/s", r["rate"])
        out.lower(f"N={n} ask→add p50, ms", r["add_p50"])
        out.lower(f"N={n} ask→add p99, ms", r["add_p99"])
        out.lower(f"N={n} answer→return p50, ms", r["ret_p50"])
        out.lower(f"N={n} answer→return p99, ms", r["ret_p99"])
        out.lower(f"N={n} server CPU per cycle, ms", r["cpu_ms"])
        for part in parts:
            if part in r["split"]:
                out.lower(f"N={n} CPU per cycle: {part}, ms", r["split"][part])
    out.write(args.json)


if __name__ == "__main__":
    main()
