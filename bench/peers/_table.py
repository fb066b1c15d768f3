"""One Markdown table of peer reports, each peer's numbers also as a ratio to Layby's at the same N.

Reports are plain dicts (the JSON each peer script writes): ``system``, ``missing`` and ``points``,
each point with ``n``, ``rate``, ``seen_p50``/``seen_p99``, ``resume_p50``/``resume_p99`` (ms),
``system_cpu_ms`` and ``client_cpu_ms`` (per cycle).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, is_dataclass
from typing import Any

BASELINE = "Layby"
TIMES = "\u00d7"  # the multiplication sign
MEDIANED = (
    "rate",
    "seen_p50",
    "seen_p99",
    "resume_p50",
    "resume_p99",
    "system_cpu_ms",
    "client_cpu_ms",
    "seconds",
)

HEADER = (
    "| system | askers N | cycles/s | ask→seen p50 / p99 | answer→resume p50 / p99 "
    "| system CPU / cycle | client CPU / cycle | total CPU / cycle "
    "| cycles/s vs Layby | resume p99 vs Layby | total CPU vs Layby |"
)
RULE = "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"


def _as_dict(report: Any) -> dict[str, Any]:
    return asdict(report) if is_dataclass(report) and not isinstance(report, type) else dict(report)


def ms(value: float) -> str:
    if value is None or math.isnan(value):
        return "—"
    if value < 10:
        return f"{value:.2f} ms"
    return f"{value:.1f} ms" if value < 100 else f"{value:.0f} ms"


def ratio(value: float, base: float) -> str:
    """``value / base`` as '0.42' and a multiplication sign; a dash where either is missing or the
    base is zero."""
    if value is None or base is None or math.isnan(value) or math.isnan(base) or base == 0:
        return "—"
    r = value / base
    return f"{r:.2f}{TIMES}" if r < 10 else f"{r:.0f}{TIMES}"


def total_cpu(point: Mapping[str, Any]) -> float:
    return float(point["system_cpu_ms"]) + float(point["client_cpu_ms"])


def merge_rounds(rounds: Sequence[Iterable[Any]]) -> list[dict[str, Any]]:
    """Reports of several rounds (each a list of reports, one per system) as one list: per system
    and N the median of each measure across rounds, cycles and failures summed. A system missing
    in any round is reported missing."""
    merged: dict[str, dict[str, Any]] = {}
    for round_reports in rounds:
        for raw in round_reports:
            report = _as_dict(raw)
            into = merged.setdefault(
                report["system"],
                {
                    "system": report["system"],
                    "versions": report.get("versions", {}),
                    "missing": None,
                    "setup": report.get("setup", ""),
                    "by_n": {},
                },
            )
            if report.get("missing"):
                into["missing"] = report["missing"]
            for point in report.get("points", []):
                into["by_n"].setdefault(point["n"], []).append(dict(point))
    out = []
    for system, into in merged.items():
        points = []
        for _n, samples in sorted(into.pop("by_n").items()):
            point = dict(samples[0])
            for key in MEDIANED:
                point[key] = statistics.median(float(s[key]) for s in samples)
            labels = {label for s in samples for label in s.get("system_cpu_by_process", {})}
            point["system_cpu_by_process"] = {
                label: statistics.median(
                    float(s["system_cpu_by_process"].get(label, math.nan)) for s in samples
                )
                for label in sorted(labels)
            }
            point["cycles"] = sum(int(s["cycles"]) for s in samples)
            point["failures"] = sum(int(s.get("failures", 0)) for s in samples)
            point["rounds"] = len(samples)
            points.append(point)
        into["points"] = points
        into["system"] = system
        out.append(into)
    return out


def render(reports: Iterable[Any]) -> str:
    """The table: rows by N, then in the order the systems were given; Layby's row is the base."""
    data = [_as_dict(r) for r in reports]
    base: dict[int, Mapping[str, Any]] = {}
    for report in data:
        if report["system"] == BASELINE and not report.get("missing"):
            base = {p["n"]: p for p in report["points"]}
    levels = sorted({p["n"] for r in data for p in r.get("points", [])})
    lines = [HEADER, RULE]
    for n in levels:
        for report in data:
            for p in report.get("points", []):
                if p["n"] != n:
                    continue
                b = base.get(n)
                failed = f" ({p['failures']} failed)" if p.get("failures") else ""
                lines.append(
                    f"| {report['system']} | {n} | {p['rate']:.0f}{failed} "
                    f"| {ms(p['seen_p50'])} / {ms(p['seen_p99'])} "
                    f"| {ms(p['resume_p50'])} / {ms(p['resume_p99'])} "
                    f"| {ms(p['system_cpu_ms'])} | {ms(p['client_cpu_ms'])} | {ms(total_cpu(p))} "
                    f"| {ratio(p['rate'], b['rate']) if b else '—'} "
                    f"| {ratio(p['resume_p99'], b['resume_p99']) if b else '—'} "
                    f"| {ratio(total_cpu(p), total_cpu(b)) if b else '—'} |"
                )
    for report in data:
        if report.get("missing"):
            lines.append(f"| {report['system']} | — | {report['missing']} |" + " |" * 8)
    return "\n".join(lines)


def render_split(reports: Iterable[Any]) -> str:
    """The system CPU per cycle of each point, by process (where a system has several)."""
    lines = []
    for report in (_as_dict(r) for r in reports):
        for p in report.get("points", []):
            split = p.get("system_cpu_by_process") or {}
            if split:
                parts = ", ".join(f"{label} {ms(value)}" for label, value in split.items())
                lines.append(f"- {report['system']}, N={p['n']}: {parts}")
    return "\n".join(lines)
