"""How the ``layby`` command line shows the doors' answers as text (without ``--json``):
tables of questions, runs, workers, doors and notifications (docs/cli.md#the-command-line)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Columns as wide as their widest cell, two spaces apart; the last one unpadded."""
    lines = [header, *rows]
    widths = [max(len(line[i]) for line in lines) for i in range(len(header) - 1)]
    return "\n".join(
        "  ".join([*(cell.ljust(w) for cell, w in zip(line, widths, strict=False)), line[-1]]).rstrip()
        for line in lines
    )


def footer(data: dict[str, Any], what: str) -> str:
    more = f"; next page {data['next_page']}" if data["next_page"] else ""
    return f"\n{len(data['items'])} of {data['total']} {what} (page {data['page']}){more}"


def short(text: str, width: int = 60) -> str:
    line = " ".join(text.split())
    return line if len(line) <= width else line[: width - 3] + "..."


def interactions_text(data: dict[str, Any]) -> str:
    rows = [
        (
            it["interaction_id"],
            it["answer_format"],
            it.get("audience", "-"),
            it["timeout_at"][:19],
            short(str(it["question"])),
        )
        for it in data["items"]
    ]
    shown = table(("ID", "FORMAT", "AUDIENCE", "TIMEOUT AT", "QUESTION"), rows)
    return shown + "\n" + footer(data, "pending")


def history_text(data: dict[str, Any]) -> str:
    """A question's history, one step a line: when, what, who, where, and what it said."""
    rows = [
        (
            e["at"][:19],
            e["kind"],
            e.get("by", "-"),
            e.get("via") or ",".join(e.get("channels") or []) or "-",
            short(_history_detail(e)),
        )
        for e in data["entries"]
    ]
    return table(("AT", "STEP", "BY", "WHERE", "DETAIL"), rows)


def _history_detail(entry: dict[str, Any]) -> str:
    if entry.get("to"):
        return " ".join(filter(None, ["to " + ", ".join(entry["to"]), entry.get("detail")]))
    if entry.get("decision"):
        return " ".join(filter(None, [entry["decision"], entry.get("reason")]))
    if "answer" in entry:
        return json.dumps(entry["answer"])
    parts = [entry.get(k) for k in ("answer_format", "reason", "result", "detail")]
    return " ".join(str(p) for p in parts if p is not None) or "-"


def notifications_text(data: dict[str, Any]) -> str:
    rows = [
        (
            it["created_at"][:19],
            it.get("recipient") or "-",
            it.get("audience") or "-",
            short(str(it["message"])),
        )
        for it in data["notifications"]
    ]
    shown = table(("CREATED AT", "RECIPIENT", "AUDIENCE", "MESSAGE"), rows)
    return shown + f"\n\n{len(rows)} notifications, newest first"


def runs_text(data: dict[str, Any]) -> str:
    rows = [
        (
            it["run_id"],
            str(it["flow"]),
            it["status"],
            str(it["generation"]),
            str(it["identity"]),
            (it.get("updated_at") or "-")[:19],
            (it.get("expiry_at") or "-")[:19],
        )
        for it in data["items"]
    ]
    shown = table(("RUN", "FLOW", "STATUS", "GEN", "IDENTITY", "UPDATED", "EXPIRY"), rows)
    return shown + "\n" + footer(data, "runs")


RUN_FIELDS = (
    "run_id",
    "flow",
    "identity",
    "status",
    "generation",
    "created_at",
    "updated_at",
    "resume_id",
    "steps",
    "cancelled_by",
    "retried_by",
    "warning",
)


def run_text(data: dict[str, Any]) -> str:
    lines = [f"{key + ':':<12}{data[key]}" for key in RUN_FIELDS if key in data]
    for ask in data.get("asks", []):
        by = f" by {ask['answered_by']}" if "answered_by" in ask else ""
        expires = f"expires {ask['expiry_at'][:19]}"
        lines.append(f"  ask {ask['interaction_id']}  {ask['status']}{by}  {expires}  {ask['question']}")
    if "result" in data:
        lines.append(f"{'result:':<12}{json.dumps(data['result'])}")
    if "error" in data:
        lines.append(f"{'error:':<12}{data['error']}")
    return "\n".join(lines)


def timeline_text(data: dict[str, Any]) -> str:
    """A run's timeline, one entry a line: when, the wait before it, what, who, where, what it says."""
    rows = [
        (
            e["at"][:19],
            f"+{duration_text(e['after_ms'])}",
            e["kind"],
            e.get("by") or "-",
            e.get("via") or ",".join(e.get("channels") or []) or "-",
            short(_timeline_detail(e)),
        )
        for e in data["entries"]
    ]
    shown = table(("AT", "WAIT", "EVENT", "BY", "WHERE", "DETAIL"), rows)
    more = f"\n\npage {data['page']}: next is {data['next_page']}" if data.get("next_page") else ""
    return f"{data['flow']} run {data['run_id']}: {data['total']} entries\n{shown}{more}"


def _timeline_detail(entry: dict[str, Any]) -> str:
    if entry["kind"] == "step":
        failed = f" failed: {entry['error']}" if entry.get("error") else ""
        return f"{entry.get('name')} ({entry.get('attempts', 1)} attempt(s)){failed}"
    parts = [entry.get("question"), entry.get("detail"), entry.get("error")]
    if "answer" in entry:
        parts.append(json.dumps(entry["answer"]))
    return " \u2014 ".join(str(p) for p in parts if p) or "-"


def duration_text(ms: int) -> str:
    """Milliseconds in words: ``850ms``, ``12s``, ``3m20s``, ``2h5m``."""
    if ms < 1000:
        return f"{ms}ms"
    seconds = ms // 1000
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{seconds}s" if seconds else f"{minutes}m"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes}m" if minutes else f"{hours}h"


def _versioned(flow: str, versions: dict[str, int]) -> str:
    """A flow as ``layby workers`` shows it: ``release v2`` when not version 1 (docs/versions.md)."""
    version = versions.get(flow, 1)
    return flow if version == 1 else f"{flow} v{version}"


def workers_text(data: dict[str, Any]) -> str:
    rows = [
        (
            w["worker_id"],
            "yes" if w["alive"] else "no",
            w["identity"],
            w["seen_at"][:19],
            ", ".join(_versioned(f, w.get("versions") or {}) for f in w["flows"]),
        )
        for w in data["items"]
    ]
    shown = table(("WORKER", "ALIVE", "IDENTITY", "SEEN AT", "FLOWS"), rows)
    return f"{shown}\n\n{data['alive']} alive of {len(data['items'])} seen in the last hour"


def doors_text(data: dict[str, Any]) -> str:
    rows = [
        (
            d["name"],
            d["spec"]["kind"],
            d["spec"]["target"],
            d["spec"].get("subject") or "-",
            d["updated_by"],
            d["updated_at"][:19],
        )
        for d in data["items"]
    ]
    shown = table(("NAME", "KIND", "TARGET", "SUBJECT", "UPDATED BY", "UPDATED"), rows)
    return shown + "\n" + footer(data, "doors")
