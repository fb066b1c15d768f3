"""The ``layby`` command line (docs/cli.md#the-command-line)."""

from __future__ import annotations

import argparse
import asyncio
import http.client
import importlib
import json
import os
import sys
from collections.abc import Callable, Iterator
from importlib.metadata import entry_points
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

import msgspec

from layby.logs import configure_logging
from layby.runtime import data_dir, read_runtime
from layby.settings import ClientSettings, SettingsError, load_client_settings
from layby_domain.formats import NAMES


class CliError(Exception):
    pass


def _endpoint(settings: ClientSettings) -> tuple[str, str]:
    runtime = read_runtime(data_dir(settings))
    url = settings.url or (runtime.url if runtime else None)
    token = settings.token or (runtime.token if runtime else None)
    if not url:
        raise CliError("no Layby URL: set LAYBY_URL or start `layby up`")
    if not token:
        raise CliError("no token: set LAYBY_TOKEN or start `layby up`")
    return url.rstrip("/"), token


def _conn(url: str, timeout: float | None = 30) -> http.client.HTTPConnection:
    parts = urlsplit(url)
    cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    return cls(parts.hostname or "127.0.0.1", parts.port, timeout=timeout)


def _request(settings: ClientSettings, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    url, token = _endpoint(settings)
    conn = _conn(url)
    headers = {"Authorization": f"Bearer {token}", "Accept": "application/json", "Layby-Client": "cli"}
    payload = None
    if body is not None:
        payload = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    try:
        conn.request(method, urlsplit(url).path + path, body=payload, headers=headers)
        resp = conn.getresponse()
        raw = resp.read()
    except OSError as exc:
        raise CliError(f"cannot reach Layby at {url}: {exc}") from None
    finally:
        conn.close()
    try:
        return resp.status, json.loads(raw) if raw else None
    except ValueError:
        return resp.status, raw.decode(errors="replace")


def _fail(status: int, body: Any) -> int:
    message = body.get("error") if isinstance(body, dict) else body
    print(f"error ({status}): {message}", file=sys.stderr)
    return 1


def _table(items: list[dict[str, Any]]) -> str:
    rows = [("ID", "FORMAT", "AUDIENCE", "TIMEOUT AT", "QUESTION")]
    for it in items:
        question = " ".join(str(it["question"]).split())
        rows.append(
            (
                it["interaction_id"],
                it["answer_format"],
                it.get("audience", "-"),
                it["timeout_at"][:19],
                question if len(question) <= 60 else question[:57] + "...",
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    return "\n".join("  ".join(c.ljust(widths[i]) if i < 4 else c for i, c in enumerate(r)) for r in rows)


def _paged(path: str, args: argparse.Namespace, **filters: Any) -> str:
    """``path`` with the set ``--page``/``--page-size`` (and filters) as its query."""
    query = {k: v for k, v in filters.items() if v is not None}
    query.update({k: v for k, v in (("page", args.page), ("pageSize", args.page_size)) if v is not None})
    return path + (f"?{urlencode(query)}" if query else "")


def cmd_list(settings: ClientSettings, args: argparse.Namespace) -> int:
    path = _paged(
        "/api/interactions", args, q=args.search, format=args.format, group=args.group, sort=args.sort
    )
    status, body = _request(settings, "GET", path)
    if status != 200:
        return _fail(status, body)
    if args.json:
        print(json.dumps(body["data"], indent=2))
        return 0
    data = body["data"]
    print(_table(data["items"]))
    more = f"; next page {data['next_page']}" if data["next_page"] else ""
    print(f"\n{len(data['items'])} of {data['total']} pending (page {data['page']}){more}")
    return 0


def _sse_events(resp: http.client.HTTPResponse) -> Iterator[dict[str, str]]:
    event: dict[str, str] = {}
    for raw in resp:
        line = raw.decode("utf-8").rstrip("\n").rstrip("\r")
        if not line:
            if event:
                yield event
                event = {}
            continue
        if line.startswith(":"):
            continue
        key, _, value = line.partition(":")
        event[key] = value[1:] if value.startswith(" ") else value


def cmd_stream(settings: ClientSettings, args: argparse.Namespace) -> int:
    url, token = _endpoint(settings)
    last_id: str | None = None
    while True:
        conn = _conn(url, timeout=None)
        headers = {"Authorization": f"Bearer {token}", "Accept": "text/event-stream"}
        if last_id:
            headers["Last-Event-ID"] = last_id
        try:
            conn.request("GET", urlsplit(url).path + "/api/interactions/stream", headers=headers)
            resp = conn.getresponse()
            if resp.status != 200:
                return _fail(resp.status, json.loads(resp.read() or b"null"))
            for ev in _sse_events(resp):
                last_id = ev.get("id", last_id)
                data = json.loads(ev.get("data", "null"))
                if args.json:
                    print(
                        json.dumps({"id": ev.get("id"), "event": ev.get("event"), "data": data}), flush=True
                    )
                else:
                    detail = f"  {data.get('question', '')}" if ev.get("event") == "interaction.add" else ""
                    print(
                        f"{ev.get('id', ''):>8}  {ev.get('event', ''):<22} {data['interaction_id']}{detail}",
                        flush=True,
                    )
        except KeyboardInterrupt:
            return 0
        except (OSError, http.client.HTTPException):
            print("stream interrupted; reconnecting...", file=sys.stderr)
            import time

            time.sleep(1)
        finally:
            conn.close()


def cmd_answer(settings: ClientSettings, args: argparse.Namespace) -> int:
    try:
        value = json.loads(args.answer)
    except ValueError as exc:
        print(f"error: --answer must be JSON (quote strings: '\"yes\"'): {exc}", file=sys.stderr)
        return 2
    status, body = _request(
        settings, "POST", f"/api/interactions/{args.interaction_id}/answer", {"answer": value}
    )
    if status != 200:
        return _fail(status, body)
    print(json.dumps(body["data"]) if args.json else f"answered {body['data']['interaction_id']}")
    return 0


def _json_option(name: str, raw: str | None) -> Any:
    """A JSON-valued option, or None when it was not given."""
    if raw is None:
        return None
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise ValueError(f"{name} must be JSON: {exc}") from None


def cmd_ask(settings: ClientSettings, args: argparse.Namespace) -> int:
    from layby.sdk import connect

    try:
        schema = _json_option("--schema", args.schema)
        media = _json_option("--media", args.media)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2

    async def run() -> Any:
        async with await connect(settings=settings) as client:
            return await client.ask_user(
                args.question,
                answer_format=args.format,
                options=args.option or None,
                schema=schema,
                timeout=args.timeout,
                group_id=args.group_id,
                audience=args.audience,
                media=media,
                link=args.link,
                channel=args.channel,
                recipient=args.recipient,
            )

    try:
        answer = asyncio.run(run())
    except (ValueError, RuntimeError, TimeoutError, PermissionError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    print(json.dumps(answer))
    return 0


def _run_table(items: list[dict[str, Any]]) -> str:
    rows = [("RUN", "FLOW", "STATUS", "GEN", "IDENTITY", "UPDATED", "EXPIRY")]
    for it in items:
        rows.append(
            (
                it["run_id"],
                str(it["flow"]),
                it["status"],
                str(it["generation"]),
                str(it["identity"]),
                (it.get("updated_at") or "-")[:19],
                (it.get("expiry_at") or "-")[:19],
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(widths[i]) for i, c in enumerate(r)).rstrip() for r in rows)


def cmd_runs_list(settings: ClientSettings, args: argparse.Namespace) -> int:
    status, body = _request(settings, "GET", _paged("/api/runs", args, status=args.status))
    if status != 200:
        return _fail(status, body)
    data = body["data"]
    if args.json:
        print(json.dumps(data, indent=2))
        return 0
    print(_run_table(data["items"]))
    more = f"; next page {data['next_page']}" if data["next_page"] else ""
    print(f"\n{len(data['items'])} of {data['total']} runs (page {data['page']}){more}")
    return 0


def cmd_runs_show(settings: ClientSettings, args: argparse.Namespace) -> int:
    status, body = _request(settings, "GET", f"/api/runs/{quote(args.run_id, safe='')}")
    if status != 200:
        return _fail(status, body)
    data = body["data"]
    if args.json:
        print(json.dumps(data, indent=2))
        return 0
    for key in (
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
    ):
        if key in data:
            print(f"{key + ':':<12}{data[key]}")
    for ask in data.get("asks", []):
        by = f" by {ask['answered_by']}" if "answered_by" in ask else ""
        expires = ask["expiry_at"][:19]
        print(f"  ask {ask['interaction_id']}  {ask['status']}{by}  expires {expires}  {ask['question']}")
    if "result" in data:
        print(f"{'result:':<12}{json.dumps(data['result'])}")
    if "error" in data:
        print(f"{'error:':<12}{data['error']}")
    return 0


def _run_action(settings: ClientSettings, args: argparse.Namespace, action: str) -> int:
    status, body = _request(settings, "POST", f"/api/runs/{quote(args.run_id, safe='')}/{action}")
    if status != 200:
        return _fail(status, body)
    data = body["data"]
    if args.json:
        print(json.dumps(data, indent=2))
    else:
        print(f"{data['run_id']} {data['status']}")
    return 0


def cmd_runs_cancel(settings: ClientSettings, args: argparse.Namespace) -> int:
    return _run_action(settings, args, "cancel")


def cmd_runs_retry(settings: ClientSettings, args: argparse.Namespace) -> int:
    return _run_action(settings, args, "retry")


def cmd_workers(settings: ClientSettings, args: argparse.Namespace) -> int:
    status, body = _request(settings, "GET", "/api/workers")
    if status != 200:
        return _fail(status, body)
    data = body["data"]
    if args.json:
        print(json.dumps(data, indent=2))
        return 0
    rows = [("WORKER", "ALIVE", "IDENTITY", "SEEN AT", "FLOWS")]
    for w in data["items"]:
        alive = "yes" if w["alive"] else "no"
        rows.append((w["worker_id"], alive, w["identity"], w["seen_at"][:19], ", ".join(w["flows"])))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    print("\n".join("  ".join(c.ljust(widths[i]) if i < 4 else c for i, c in enumerate(r)) for r in rows))
    print(f"\n{data['alive']} alive of {len(data['items'])} seen in the last hour")
    return 0


def cmd_runs_start(settings: ClientSettings, args: argparse.Namespace) -> int:
    from layby.sdk import connect

    try:
        value = json.loads(args.input) if args.input is not None else None
    except ValueError as exc:
        print(f"error: --input must be JSON: {exc}", file=sys.stderr)
        return 2

    async def run() -> str:
        async with await connect(settings=settings) as client:
            return await client.start_run(args.flow, value, run_id=args.run_id)

    try:
        run_id = asyncio.run(run())
    except (ValueError, RuntimeError, TimeoutError, PermissionError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(run_id)
    return 0


def cmd_worker(settings: ClientSettings, args: argparse.Namespace) -> int:
    """Serve the flows of a ``layby.Worker`` found at ``MODULE:ATTRIBUTE`` until interrupted."""
    import signal

    from layby.worker import Worker

    module_name, _, attr = args.target.partition(":")
    sys.path.insert(0, os.getcwd())
    try:
        worker = getattr(importlib.import_module(module_name), attr or "worker")
    except (ImportError, AttributeError) as exc:
        print(f"error: cannot load {args.target}: {exc}", file=sys.stderr)
        return 2
    if not isinstance(worker, Worker):
        print(f"error: {args.target} is not a layby.Worker", file=sys.stderr)
        return 2

    async def run() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        try:
            await worker.serve(stop)
        finally:
            await worker.close()

    asyncio.run(run())
    return 0


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

    ask = sub.add_parser("ask", help="ask a question and block until it is answered")
    ask.add_argument("question")
    ask.add_argument("--format", default="text", choices=NAMES)
    ask.add_argument("--link", help="external: the URL to visit, a template containing {callback_url}")
    ask.add_argument("--channel", help="deliver through this channel of LAYBY_CHANNELS")
    ask.add_argument("--recipient", help="with --channel: where to deliver (chat id, phone number)")
    ask.add_argument("--option", action="append", help="a choice (select) or suggested reply (text)")
    ask.add_argument("--schema", help="JSON schema of a form answer")
    ask.add_argument("--timeout", type=float)
    ask.add_argument("--group-id")
    ask.add_argument("--audience")
    ask.add_argument(
        "--media",
        help='display-only media as JSON: [{"kind": "image", "url": "https://...", "caption": "..."}]',
    )

    runs = sub.add_parser("runs", help="start, list, show, cancel and retry resumable runs").add_subparsers(
        dest="action", required=True
    )
    rls = runs.add_parser("list", help="runs, most recently active first")
    rls.add_argument("--status", choices=["running", "parked", "resumed", "finished", "failed", "cancelled"])
    rls.add_argument("--page", type=int)
    rls.add_argument("--page-size", type=int)
    rls.add_argument("--json", action=argparse.BooleanOptionalAction, default=False)
    rshow = runs.add_parser("show", help="one run: status, open questions and deadlines, result")
    rshow.add_argument("run_id")
    rshow.add_argument("--json", action=argparse.BooleanOptionalAction, default=False)
    rstart = runs.add_parser("start", help="start a run of a flow; prints its run id")
    rstart.add_argument("flow")
    rstart.add_argument("--input", help="the flow's input as JSON")
    rstart.add_argument("--run-id", help="your own uuid4 run id (makes the start idempotent)")
    rcancel = runs.add_parser("cancel", help="cancel a running or parked run (its questions leave the inbox)")
    rcancel.add_argument("run_id")
    rcancel.add_argument("--json", action=argparse.BooleanOptionalAction, default=False)
    rretry = runs.add_parser("retry", help="run a failed run again from its last recorded step or park")
    rretry.add_argument("run_id")
    rretry.add_argument("--json", action=argparse.BooleanOptionalAction, default=False)
    wks = sub.add_parser("workers", help="workers seen in the last hour: alive or not, and their flows")
    wks.add_argument("--json", action=argparse.BooleanOptionalAction, default=False)

    wrk = sub.add_parser("worker", help="execute the flows of a layby.Worker (MODULE:ATTRIBUTE)")
    wrk.add_argument("target", help="e.g. myapp.flows:worker")
    return parser


COMMANDS = {
    ("interactions", "list"): cmd_list,
    ("interactions", "stream"): cmd_stream,
    ("interactions", "answer"): cmd_answer,
    ("ask", None): cmd_ask,
    ("runs", "list"): cmd_runs_list,
    ("runs", "show"): cmd_runs_show,
    ("runs", "start"): cmd_runs_start,
    ("runs", "cancel"): cmd_runs_cancel,
    ("runs", "retry"): cmd_runs_retry,
    ("workers", None): cmd_workers,
    ("worker", None): cmd_worker,
}


Handler = Callable[[ClientSettings, argparse.Namespace], int]
Register = Callable[[Any], dict[tuple[str, str | None], Handler]]

SERVER_COMMANDS = ("up", "serve", "projections")
"""Commands the server distribution adds (``layby.cli`` entry points); named here so that an
SDK-only install says what is missing instead of "invalid choice"."""


def _plugins(sub: Any) -> dict[tuple[str, str | None], Handler]:
    """Commands of installed distributions that extend the CLI (the server registers its own)."""
    commands: dict[tuple[str, str | None], Handler] = {}
    for entry in entry_points(group="layby.cli"):
        register: Register = entry.load()
        commands.update(register(sub))
    return commands


def _server_missing(_settings: ClientSettings, args: argparse.Namespace) -> int:
    print(
        f"error: 'layby {args.command}' is a server command; this install has the SDK only "
        "(install the whole system from the repository: pip install -e .)",
        file=sys.stderr,
    )
    return 2


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    commands = {**COMMANDS, **_plugins(sub)}
    for name in SERVER_COMMANDS:
        if not any(key[0] == name for key in commands):
            missing = sub.add_parser(name, help="(server) not installed", add_help=False)
            missing.add_argument("rest", nargs=argparse.REMAINDER)
            commands[(name, None)] = _server_missing
    args = parser.parse_args(argv)
    try:
        settings = load_client_settings()
    except SettingsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    # The CLI's output is its answer (often JSON for a script): log lines go to stderr.
    configure_logging(settings.log_format, settings.log_level)
    handler = commands[(args.command, getattr(args, "action", None))]
    try:
        return handler(settings, args)
    except (CliError, SettingsError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2 if isinstance(exc, SettingsError) else 1
    except msgspec.DecodeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
