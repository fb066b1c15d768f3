"""Peers side by side: the same ask→answer→resume workload on Layby, LangGraph, Temporal and Restate.

    .venv/bin/python bench/peers/run.py [--systems layby langgraph temporal restate]
                                        [--seconds 10] [--concurrency 1 100] [--rounds 1]

Runs each chosen system's script (bench/peers/peer_*.py) one after another, in this one
invocation on this machine, each in a process of its own that starts and stops the system it
measures; with ``--rounds R`` it does so R times, every other round in reverse order, and reports
the median of the rounds. Prints one table in which each peer's numbers are also a ratio to
Layby's at the same N. A system whose software is missing is reported as not installed, with
the command that installs it. Method and results: docs/performance.md#peers-side-by-side-benchpeers.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _harness as h
from _table import merge_rounds, render, render_split

# key: (the system's name in the table, its script, extra arguments)
SCRIPTS = {
    "layby": ("Layby", "peer_layby.py", []),
    "langgraph": ("LangGraph", "peer_langgraph.py", []),
    "temporal": ("Temporal", "peer_temporal.py", []),
    "temporal-in-memory": ("Temporal (in-memory)", "peer_temporal.py", ["--in-memory"]),
    "restate": ("Restate", "peer_restate.py", []),
}
DEFAULT = ["layby", "langgraph", "temporal", "restate"]


def run_one(key: str, args: object, out: Path) -> dict[str, object]:
    system, script, extra = SCRIPTS[key]
    a = vars(args)
    cmd = [
        sys.executable, str(h.here() / script), "--no-netns", "--json", str(out),
        "--seconds", str(a["seconds"]), "--answerers", str(a["answerers"]), "--think-ms", str(a["think_ms"]),
        "--concurrency", *map(str, a["concurrency"]), *extra,
    ]  # fmt: skip
    print(f"== {system}", file=sys.stderr, flush=True)
    done = subprocess.run(cmd, stdout=subprocess.DEVNULL, check=False)
    if done.returncode != 0 or not out.exists():
        return {
            "system": system,
            "missing": f"failed (exit {done.returncode}; its output is above)",
            "points": [],
        }
    report: dict[str, object] = json.loads(out.read_text(encoding="utf-8"))
    report["system"] = system  # the name this table uses (a variant's script names itself alike)
    return report


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{os.cpu_count()} cores ({cpu}), {platform.system()} {platform.release()}"


def main() -> None:
    p = h.parser(__doc__ or "")
    p.add_argument("--systems", nargs="+", choices=list(SCRIPTS), default=DEFAULT)
    p.add_argument(
        "--rounds", type=int, default=1, help="run every system this many times, alternating order"
    )
    args = p.parse_args()
    h.enter_private_network(args)
    started = datetime.now(UTC)
    load_before = os.getloadavg()
    rounds = []
    with tempfile.TemporaryDirectory(prefix="peers-") as tmp:
        for r in range(args.rounds):
            order = args.systems if r % 2 == 0 else list(reversed(args.systems))
            reports = []
            for key in order:
                reports.append(run_one(key, args, Path(tmp) / f"{key}-{r}.json"))
                time.sleep(2)  # let the last system's processes finish exiting
            rounds.append(reports)
    merged = merge_rounds(rounds)
    merged.sort(key=lambda rep: [SCRIPTS[k][0] for k in args.systems].index(rep["system"]))
    load_after = os.getloadavg()
    if args.json:
        args.json.write_text(json.dumps(merged, indent=1), encoding="utf-8")
    print()
    print(f"Peers side by side, {started:%Y-%m-%d %H:%M} UTC, on {machine()}")
    print(
        f"{args.seconds:g} s per level, {args.answerers} answers in flight at most, "
        f"think time {args.think_ms:g} ms, "
        f"{args.rounds} round(s){' (medians)' if args.rounds > 1 else ''}; "
        f"load average before {load_before[0]:.2f}, after {load_after[0]:.2f}"
    )
    print()
    for rep in merged:
        if rep.get("missing"):
            continue
        versions = ", ".join(f"{k} {v}" for k, v in rep["versions"].items())
        print(f"- {rep['system']}: {rep['setup']}; {versions}")
    print()
    print(render(merged))
    print()
    print("System CPU per cycle, by process:")
    print(render_split(merged))


if __name__ == "__main__":
    main()
