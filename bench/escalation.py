"""Benchmark: how late escalations fire with many routed questions open (docs/routing.md#escalation).

    python bench/escalation.py [--questions 1000] [--after 8] [--spread 4] [--url URL --token T]

Without --url it starts `layby up` itself (embedded NATS and PostgreSQL, a temporary data dir).
It asks ``--questions`` HTTP asks, each with one escalation step due ``--after`` seconds after it
was asked plus a share of ``--spread`` seconds (so the steps come due over that window, not all in
one instant), and a deadline well after. Once every step has fired it reads each question's
history: the lateness of a step is its ``escalated`` entry's time minus the asked entry's time
plus the step's ``after``. Prints the p50 / p99 / max lateness, and how many steps fired more
than once (it must be none).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from datetime import datetime
from pathlib import Path
from urllib.parse import urlsplit

import uvloop

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _http import Conn
from _result import Result, add_json_option
from _up import add_system_options, pct, table_head, up_unless_given

TARGET_P99_SECONDS = 0.5
CLIENTS = 20


async def measure(url: str, token: str, questions: int, after: float, spread: float) -> dict:
    where = urlsplit(url)
    host, port = where.hostname or "127.0.0.1", where.port or 80
    conns = [await Conn(host, port, token).open() for _ in range(CLIENTS)]
    steps: dict[str, float] = {}
    queue: asyncio.Queue[int] = asyncio.Queue()
    for i in range(questions):
        queue.put_nowait(i)
    started = time.perf_counter()

    async def ask(conn: Conn) -> None:
        while not queue.empty():
            i = queue.get_nowait()
            step_after = round(after + spread * i / questions, 3)
            body = {
                "question": f"escalate {i}",
                "answer_format": "confirm",
                "timeout": after + spread + 600,
                "routing": {"escalate": [{"after": step_after, "to": ["on-call"]}]},
            }
            status, raw = await conn.request("POST", "/api/asks", body)
            assert status == 201, raw
            steps[_id(raw)] = step_after

    await asyncio.gather(*(ask(c) for c in conns))
    asked_in = time.perf_counter() - started
    for conn in conns:
        await conn.close()
    if asked_in > after:
        print(f"warning: asking took {asked_in:.1f}s, longer than --after", file=sys.stderr)
    # Wait until the last step is due, plus a margin, then read every history.
    await asyncio.sleep(max(0.0, after + spread - asked_in) + 2.0)
    conns = [await Conn(host, port, token).open() for _ in range(CLIENTS)]  # idle ones were closed
    lateness: list[float] = []
    twice = 0
    missing = 0
    pending = list(steps.items())

    async def read(conn: Conn) -> None:
        nonlocal twice, missing
        while pending:
            iid, step_after = pending.pop()
            for attempt in range(20):
                status, raw = await conn.request("GET", f"/api/interactions/{iid}/history")
                assert status == 200, raw
                entries = _entries(raw)
                escalated = [e for e in entries if e["kind"] == "escalated"]
                if escalated or attempt == 19:
                    break
                await asyncio.sleep(0.25)
            if not escalated:
                missing += 1
                continue
            twice += len(escalated) > 1
            asked = next(e for e in entries if e["kind"] == "asked")
            due = _at(asked["at"]) + step_after
            lateness.append(_at(escalated[0]["at"]) - due)

    await asyncio.gather(*(read(c) for c in conns))
    for conn in conns:
        await conn.close()
    return {
        "questions": questions,
        "fired": len(lateness),
        "missing": missing,
        "twice": twice,
        "p50": pct(lateness, 0.5),
        "p99": pct(lateness, 0.99),
        "max": max(lateness) * 1000 if lateness else float("nan"),
        "asked_in": asked_in,
    }


def _id(raw: bytes) -> str:
    import json

    return str(json.loads(raw)["data"]["interaction_id"])


def _entries(raw: bytes) -> list[dict]:
    import json

    return list(json.loads(raw)["data"]["entries"])


def _at(value: str) -> float:
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_system_options(parser, nats=False)
    parser.add_argument("--questions", type=int, default=1000)
    parser.add_argument("--after", type=float, default=8.0, help="seconds before the first step is due")
    parser.add_argument("--spread", type=float, default=4.0, help="seconds the steps come due over")
    add_json_option(parser)
    args = parser.parse_args()
    with up_unless_given(args.url) as up:
        url, token = (up.url, up.token) if up is not None else (args.url, args.token)
        r = uvloop.run(measure(url, token, args.questions, args.after, args.spread))
    print()
    print(f"{r['questions']} routed questions asked in {r['asked_in']:.1f}s, each escalating once")
    table_head(
        "| steps fired | fired twice | missing | lateness p50 | lateness p99 | lateness max |", first="---:"
    )
    print(
        f"| {r['fired']} | {r['twice']} | {r['missing']} | {r['p50']:.0f} ms | {r['p99']:.0f} ms "
        f"| {r['max']:.0f} ms |"
    )
    verdict = (
        "met" if r["p99"] / 1000 < TARGET_P99_SECONDS and not r["twice"] and not r["missing"] else "NOT met"
    )
    print(f"target: p99 < {TARGET_P99_SECONDS * 1000:.0f} ms, each step once: {verdict}")
    out = Result("escalation")
    out.lower("lateness p50, ms", r["p50"])
    out.lower("lateness p99, ms", r["p99"])
    out.lower("steps fired twice", r["twice"])
    out.write(args.json)


if __name__ == "__main__":
    main()
