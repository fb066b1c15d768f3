"""Benchmark: hook visits that resume a parked caller ask and get its next outcome back.

    python bench/doors.py [--subjects 50] [--seconds 20] [--steps 5]

Starts `layby up` (embedded NATS and PostgreSQL) and one worker process
(`layby worker door_flows:worker`), saves one hook per subject (``--subjects``), and drives each
subject from its own keep-alive connection for ``--seconds``: ``POST /api/hooks/<name>?wait=10``,
whose contract takes a waiting outcome, else resumes the asking entry with a payload, else starts
the flow. The flow asks its caller ``--steps`` times and then finishes, so most visits are resumes
that come back with the next park. Prints visits/s and p50/p99 per action, and CPU per visit by
process.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import msgspec
import psutil
import uvloop

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _http import Conn
from _up import Up, flow_worker, layby_up, pct, print_profile, profiled, table_head

RESUME = """
([$parked[] | select(.status == "finished" or .status == "failed") | .id]) as $done
| ([$parked[] | select(.status == "asking") | .id]) as $asking
| if ($done | length) > 0 then $done[0]
  elif ($asking | length) > 0 then {id: $asking[0], payload: 1}
  else null end
"""
START = "if ($parked | length) == 0 then {steps: .steps} else null end"


def cpu_by_process(up: Up, worker: subprocess.Popen[bytes]) -> dict[str, float]:
    out: dict[str, float] = {}
    root = psutil.Process(up.proc.pid)
    for p in [root, *root.children(recursive=True), psutil.Process(worker.pid)]:
        try:
            times = p.cpu_times()
            cmd = " ".join(p.cmdline())
        except psutil.Error:
            continue
        if p.pid == worker.pid:
            name = "worker"
        elif "nats-server" in cmd:
            name = "nats-server"
        elif "postgres" in cmd:
            name = "postgres"
        elif "jqchild" in cmd:
            name = "jq children"
        elif " serve " in f" {cmd} ":
            name = cmd.rsplit(" serve ", 1)[1].split()[0]
        else:
            name = "layby up"
        out[name] = out.get(name, 0.0) + times.user + times.system
    return out


async def bench(args: argparse.Namespace, up: Up, worker: subprocess.Popen[bytes]) -> dict[str, Any]:
    host = urlsplit(up.url).hostname or "127.0.0.1"
    port = urlsplit(up.url).port or 80
    admin = await Conn(host, port, up.token).open()
    for i in range(args.subjects):
        spec = {"kind": "hook", "target": "bench_steps", "resume_expr": RESUME, "start_expr": START}
        status, body = await admin.request("PUT", f"/api/doors/bench-{i}", spec)
        assert status in (200, 201), body
    latencies: dict[str, list[float]] = {"resume": [], "take": [], "start": [], "none": []}
    errors = 0
    stop_at = time.monotonic() + args.seconds

    async def drive(i: int) -> None:
        nonlocal errors
        conn = await Conn(host, port, up.token).open()
        try:
            while time.monotonic() < stop_at:
                t0 = time.perf_counter()
                status, body = await conn.request(
                    "POST", f"/api/hooks/bench-{i}?wait=10", {"steps": args.steps}
                )
                elapsed = time.perf_counter() - t0
                if status != 200:
                    errors += 1
                    await asyncio.sleep(0.05)
                    continue
                data = msgspec.json.decode(body)["data"]
                latencies[data["action"]].append(elapsed)
        finally:
            await conn.close()

    # Warm up: every subject has a parked run before the clock starts.
    stop_at = time.monotonic() + 3
    await asyncio.gather(*(drive(i) for i in range(args.subjects)))
    for values in latencies.values():
        values.clear()
    errors = 0
    cpu0 = cpu_by_process(up, worker)
    started = time.monotonic()
    stop_at = started + args.seconds
    await asyncio.gather(*(drive(i) for i in range(args.subjects)))
    elapsed = time.monotonic() - started
    cpu1 = cpu_by_process(up, worker)
    await admin.close()
    visits = sum(len(v) for v in latencies.values())
    return {
        "elapsed": elapsed,
        "visits": visits,
        "errors": errors,
        "latencies": latencies,
        "cpu_ms": {k: (cpu1.get(k, 0) - cpu0.get(k, 0)) * 1000 / max(visits, 1) for k in cpu1},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--subjects", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--profile", help="cProfile this service (ask, door, resume, ...) while it runs")
    args = parser.parse_args()
    profile = f"/tmp/layby-bench-doors-{args.profile}.prof"
    with layby_up(**profiled(args.profile, profile)) as up, flow_worker(up, "door_flows:worker") as worker:
        r = uvloop.run(bench(args, up, worker))
    lat = r["latencies"]
    print()
    print("CPU per visit, by process:")
    for name, ms in sorted(r["cpu_ms"].items()):
        print(f"  {name:<20} {ms:.2f} ms")
    table_head(
        f"| measure ({args.subjects} subjects, {args.seconds:.0f} s, "
        f"{args.steps} caller asks per run) | value |"
    )
    print(f"| hook visits/s (all actions) | {r['visits'] / r['elapsed']:.0f} |")
    print(f"| resume visits/s (resume → next outcome back) | {len(lat['resume']) / r['elapsed']:.0f} |")
    for action in ("resume", "take", "start"):
        if lat[action]:
            print(f"| {action}: p50 / p99 | {pct(lat[action], 0.5):.0f} / {pct(lat[action], 0.99):.0f} ms |")
    print(f"| refused visits (non-200) | {r['errors']} |")
    if args.profile:
        print_profile(f"{args.profile} (cProfile, {profile})", profile, 25)


if __name__ == "__main__":
    main()
