"""The soak: ``python -m tests.faults.soak --faults 30 --seconds 10``.

It first measures the sync cycle rate (blocking askers and the answerer, nothing else) on one
JetStream node with R1 streams, then on the three-node cluster with R3 streams, in the same run.
Then, on the cluster, it runs the whole load and injects ``--faults`` faults, every kind in turn
(``Faults.kinds``), with ``--seconds`` of load after each. It prints one row per fault kind
(tried, lost, duplicated, wrongly refused, late, stale, p99 recovery seconds), the violations, the
processes that crashed on their own (the harness restarts them, as Kubernetes would), and exits 1
when an invariant broke. ``--out`` writes the report as JSON.

Run it from the repository root with this checkout first on PYTHONPATH (docs/engineering.md#testing).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import sys
import tempfile
import time
from pathlib import Path

from tests.faults.harness import FaultRecord, Faults, Shape
from tests.faults.history import encode_report, format_table, summary
from tests.faults.session import run_session, sync_rate


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m tests.faults.soak", description=__doc__.splitlines()[0])
    parser.add_argument("--faults", type=int, default=30, help="how many faults to inject (default 30)")
    parser.add_argument("--seconds", type=float, default=10.0, help="seconds of load after each fault")
    parser.add_argument("--rate-seconds", type=float, default=15.0, help="seconds each rate is measured")
    parser.add_argument(
        "--askers", type=int, default=40, help="blocking askers while the rates are measured (default 40)"
    )
    parser.add_argument("--kinds", default="", help="comma-separated fault kinds (default: all, in turn)")
    parser.add_argument("--out", type=Path, default=None, help="write the report as JSON here")
    return parser.parse_args(argv)


def _say(text: str) -> None:
    print(text, flush=True)


async def _rate(root: Path, nodes: int, seconds: float, askers: int) -> tuple[float, Shape]:
    """The same shape but for the nodes (a worker in both: the cluster's runs the faults' parks)."""
    shape = Shape(root, nodes=nodes, worker=True)
    await shape.start()
    return await sync_rate(shape, seconds, askers=askers), shape


async def soak(args: argparse.Namespace) -> int:
    all_kinds = list(Faults(Shape(Path())).kinds)
    chosen = [k for k in args.kinds.split(",") if k] or all_kinds
    kinds = list(itertools.islice(itertools.cycle(chosen), args.faults))
    with tempfile.TemporaryDirectory(prefix="layby-soak-") as tmp:
        began = time.time()
        single, shape = await _rate(Path(tmp) / "single", 1, args.rate_seconds, args.askers)
        await shape.stop()
        _say(f"sync cycle rate, one node (R1): {single:.1f}/s")
        clustered, shape = await _rate(Path(tmp) / "cluster", 3, args.rate_seconds, args.askers)
        _say(f"sync cycle rate, three nodes (R3): {clustered:.1f}/s ({clustered / single:.2f} of one node)")
        try:

            def show(record: FaultRecord) -> None:
                _say(f"  {record.kind} on {record.target}: {record.end - record.start:.1f}s")

            session = await run_session(shape, kinds, settle=args.seconds, on_fault=show)
        finally:
            await shape.stop()
    report = session.report
    _say(f"\n{len(kinds)} faults in {time.time() - began:.0f}s; {len(session.history.ops)} operations\n")
    _say(format_table(summary(report)))
    _say(
        f"\nsync cycle rate: one node {single:.1f}/s, three nodes R3 {clustered:.1f}/s, ratio {clustered / single:.2f}"
    )
    for crash in session.crashed:
        _say(f"crashed on its own: {crash.name}-{crash.replica} exit {crash.returncode} at {crash.at:.1f}")
    for v in report.violations[:60]:
        _say(f"{v.category}: {v.rule}: {v.detail}")
    if len(report.violations) > 60:
        _say(f"... and {len(report.violations) - 60} more")
    if args.out is not None:
        args.out.write_bytes(encode_report(report))
    return 0 if report.ok else 1


def main(argv: list[str] | None = None) -> int:
    return asyncio.run(soak(_parse(sys.argv[1:] if argv is None else argv)))


if __name__ == "__main__":
    sys.exit(main())
