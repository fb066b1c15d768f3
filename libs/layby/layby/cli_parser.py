"""The ``layby`` command line's arguments: every SDK command and its options
(docs/cli.md#the-command-line). ``layby.cli`` maps each command to its handler."""

from __future__ import annotations

import argparse

from layby_domain.formats import NAMES


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="layby", description="Human-in-the-loop interactions for AI runs.")
    sub = parser.add_subparsers(dest="command", required=True)

    inter = sub.add_parser("interactions", help="list, stream and answer questions").add_subparsers(
        dest="action", required=True
    )
    lst = inter.add_parser("list", help="one page of pending questions")
    lst.add_argument("--page", type=int)
    lst.add_argument("--page-size", type=int)
    lst.add_argument("--search", help="only questions whose text contains this (case-insensitive)")
    lst.add_argument("--format", choices=NAMES)
    lst.add_argument("--group", help="only this group id")
    lst.add_argument("--sort", choices=("group", "newest", "oldest", "deadline"))
    lst.add_argument("--json", action=argparse.BooleanOptionalAction, default=False)
    stream = inter.add_parser("stream", help="tail the live feed")
    stream.add_argument("--json", action=argparse.BooleanOptionalAction, default=False)
    ans = inter.add_parser("answer", help="answer a question")
    ans.add_argument("interaction_id")
    ans.add_argument("--answer", required=True, help="the answer as JSON: '\"text\"', true, or an object")
    ans.add_argument("--json", action=argparse.BooleanOptionalAction, default=False)
    dlg = inter.add_parser("delegate", help="hand a pending question to someone else (docs/routing.md)")
    dlg.add_argument("interaction_id")
    dlg.add_argument("--to", required=True, help="the identity who decides it instead of you")
    dlg.add_argument("--note", help="a note both of you see in its history")
    dlg.add_argument("--json", action=argparse.BooleanOptionalAction, default=False)
    hist = inter.add_parser(
        "history",
        help="every recorded step of a question (asked, votes and routing, answered, removed, webhook)",
    )
    hist.add_argument("interaction_id")
    hist.add_argument("--json", action=argparse.BooleanOptionalAction, default=False)

    ask = sub.add_parser("ask", help="ask a question and block until it is answered")
    ask.add_argument("question")
    ask.add_argument("--format", default="text", choices=NAMES)
    ask.add_argument("--link", help="external: the URL to visit, a template containing {callback_url}")
    ask.add_argument(
        "--channel",
        action="append",
        help="deliver through this channel of LAYBY_CHANNELS (repeat it: every channel gets the question, "
        "the first reply wins)",
    )
    ask.add_argument(
        "--recipient",
        action="append",
        help="with --channel: where to deliver (a chat id, a phone number); with several channels, "
        "CHANNEL=RECIPIENT (repeatable)",
    )
    ask.add_argument(
        "--on-mismatch", choices=("retry", "bridge"), help="what a chat reply that does not fit does"
    )
    ask.add_argument("--mismatch-notice", help="replaces the built-in retry line; {reason} is filled in")
    ask.add_argument("--option", action="append", help="a choice (select) or suggested reply (text)")
    ask.add_argument("--schema", help="JSON schema of a form answer")
    ask.add_argument("--timeout", type=float)
    ask.add_argument("--group-id")
    ask.add_argument("--audience")
    ask.add_argument(
        "--routing",
        help='who decides and what happens while nobody does, as JSON: {"voters": ["alice", "bob"], '
        '"required": 2, "escalate": [{"after": 900, "to": ["dana"]}], "remind_every": 600}',
    )
    ask.add_argument(
        "--media",
        help='display-only media as JSON: [{"kind": "image", "url": "https://...", "caption": "..."}]',
    )

    runs = sub.add_parser(
        "runs", help="start, list, show, cancel, retry and migrate resumable runs"
    ).add_subparsers(dest="action", required=True)
    rls = runs.add_parser("list", help="runs, most recently active first")
    rls.add_argument("--status", choices=["running", "parked", "resumed", "finished", "failed", "cancelled"])
    rls.add_argument("--page", type=int)
    rls.add_argument("--page-size", type=int)
    rls.add_argument("--json", action=argparse.BooleanOptionalAction, default=False)
    rshow = runs.add_parser("show", help="one run: status, open questions and deadlines, result")
    rshow.add_argument("run_id")
    rshow.add_argument("--json", action=argparse.BooleanOptionalAction, default=False)
    rtime = runs.add_parser(
        "timeline", help="one run's story: every event, step and question, with the waits"
    )
    rtime.add_argument("run_id")
    rtime.add_argument("--page", type=int)
    rtime.add_argument("--page-size", type=int)
    rtime.add_argument("--json", action=argparse.BooleanOptionalAction, default=False)
    rstart = runs.add_parser("start", help="start a run of a flow; prints its run id")
    rstart.add_argument("flow")
    rstart.add_argument("--input", help="the flow's input as JSON")
    rstart.add_argument("--run-id", help="your own uuid4 run id (makes the start idempotent)")
    rstart.add_argument(
        "--version", type=int, help="the flow version to run on (default: the newest a live worker serves)"
    )
    rcancel = runs.add_parser("cancel", help="cancel a running or parked run (its questions leave the inbox)")
    rcancel.add_argument("run_id")
    rcancel.add_argument("--json", action=argparse.BooleanOptionalAction, default=False)
    rretry = runs.add_parser("retry", help="run a failed run again from its last recorded step or park")
    rretry.add_argument("run_id")
    rretry.add_argument("--json", action=argparse.BooleanOptionalAction, default=False)
    rmove = runs.add_parser(
        "migrate",
        help="move parked, waiting or failed runs to another version of their flow (on each run's log)",
    )
    rmove.add_argument("run_ids", nargs="*", metavar="RUN_ID", help="the runs to move")
    rmove.add_argument("--to", type=int, required=True, metavar="VERSION", help="the version to move them to")
    rmove.add_argument("--flow", help="move every movable run of this flow (with --from)")
    rmove.add_argument(
        "--from", dest="from_version", type=int, metavar="VERSION", help="the version they are on"
    )
    rmove.add_argument("--json", action=argparse.BooleanOptionalAction, default=False)
    wks = sub.add_parser("workers", help="workers seen in the last hour: alive or not, and their flows")
    wks.add_argument("--json", action=argparse.BooleanOptionalAction, default=False)

    doors = sub.add_parser("doors", help="save, list, show and delete door definitions").add_subparsers(
        dest="action", required=True
    )
    dput = doors.add_parser("put", help="save a door definition (create or replace; operator only)")
    dput.add_argument("name")
    given = dput.add_mutually_exclusive_group(required=True)
    given.add_argument("--file", help="a JSON file holding the definition ('-': standard input)")
    given.add_argument("--spec", help="the definition as JSON")
    dput.add_argument("--json", action=argparse.BooleanOptionalAction, default=False)
    dls = doors.add_parser("list", help="saved doors, by name")
    dls.add_argument("--page", type=int)
    dls.add_argument("--page-size", type=int)
    dls.add_argument("--json", action=argparse.BooleanOptionalAction, default=False)
    dshow = doors.add_parser("show", help="one door definition, as JSON")
    dshow.add_argument("name")
    ddel = doors.add_parser("delete", help="delete a door definition (operator only)")
    ddel.add_argument("name")
    ddel.add_argument("--json", action=argparse.BooleanOptionalAction, default=False)

    notes = sub.add_parser("notifications", help="send one-way notifications, read the feed").add_subparsers(
        dest="action", required=True
    )
    nls = notes.add_parser("list", help="your notification feed, newest first")
    nls.add_argument("--json", action=argparse.BooleanOptionalAction, default=False)
    nsend = notes.add_parser("notify", help="send a notification (no --channel: record it to the feed)")
    nsend.add_argument("message")
    nsend.add_argument("--channel", help="the registered channel that sends it")
    nsend.add_argument("--recipient", help="where on the channel (the channel's default when unset)")
    nsend.add_argument("--media", help="media items, as a JSON list")
    nsend.add_argument("--template", help="a provider-approved template, as a JSON object")
    nsend.add_argument("--options", help="quick replies, as a JSON list of strings")
    nsend.add_argument("--json", action=argparse.BooleanOptionalAction, default=False)

    mcp = sub.add_parser("mcp", help="serve Layby's tools to MCP clients (stdio; --http for streamable HTTP)")
    mcp.add_argument("--http", action="store_true", help="streamable HTTP with bearer tokens, not stdio")
    mcp.add_argument("--host", default="127.0.0.1", help="--http: the address to listen on")
    mcp.add_argument("--port", type=int, default=8765, help="--http: the port to listen on")

    wrk = sub.add_parser("worker", help="execute the flows of a layby.Worker (MODULE:ATTRIBUTE)")
    wrk.add_argument("target", help="e.g. myapp.flows:worker")
    return parser
