"""The ``layby`` command line (docs/cli.md#the-command-line)."""

from __future__ import annotations

from layby import lean

# Before anything below imports nats-py or structlog: the command and the services it starts load
# them without the optional packages they would load for nothing (layby/lean.py).
lean.install()

import argparse
import asyncio
import importlib
import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import msgspec

from layby import cli_text
from layby.cli_parser import build_parser
from layby.logsetup import configure_logging
from layby.runtime import data_dir, read_runtime
from layby.settings import ClientSettings, SettingsError, load_client_settings
from layby_contracts.errors import LaybyError

if TYPE_CHECKING:
    import httpx
    from httpx_sse import ServerSentEvent

_table = cli_text.table  # the name this module gave it before the text moved to cli_text

SHOWN_EVENTS = ("sdk.waiting",)
"""SDK events the command shows at info although the SDK logs them at debug: what ``layby ask``
waits for (docs/cli.md#asking)."""


class CliError(Exception):
    pass


class _Unreachable(CliError):
    """The doors did not answer (a stream reconnects; any other command stops)."""


class _Refused(Exception):
    """A door's refusal: its status and body (``main`` prints it)."""

    def __init__(self, status: int, body: Any) -> None:
        super().__init__(status)
        self.status = status
        self.body = body


def _endpoint(settings: ClientSettings) -> tuple[str, str]:
    runtime = read_runtime(data_dir(settings))
    url = settings.url or (runtime.url if runtime else None)
    token = settings.token or (runtime.token if runtime else None)
    if not url:
        raise CliError("no Layby URL: set LAYBY_URL or start `layby up`")
    if not token:
        raise CliError("no token: set LAYBY_TOKEN or start `layby up`")
    return url.rstrip("/"), token


def _client(url: str, token: str, timeout: float | None) -> httpx.Client:
    """An HTTP client of the doors at ``url`` with the caller's token; ``timeout=None`` waits for
    data forever (a stream)."""
    import httpx  # lazy: every `layby` command, `layby up` included, starts without it

    headers = {"Authorization": f"Bearer {token}", "Accept": "application/json", "Layby-Client": "cli"}
    return httpx.Client(base_url=url, headers=headers, timeout=httpx.Timeout(30, read=timeout))


@contextmanager
def _doors(settings: ClientSettings, *, timeout: float | None = 30) -> Iterator[httpx.Client]:
    """A client of the configured doors (``_client``). A connection that fails, or breaks off,
    while it is open is ``_Unreachable`` naming the URL."""
    import httpx

    url, token = _endpoint(settings)
    try:
        with _client(url, token, timeout) as client:
            yield client
    except httpx.TransportError as exc:
        raise _Unreachable(f"cannot reach Layby at {url}: {exc}") from None


def _body(response: httpx.Response) -> Any:
    """The door's JSON body (its text when it is not JSON, None when empty)."""
    if not response.content:
        return None
    try:
        return response.json()
    except ValueError:
        return response.text


def _fail(status: int, body: Any) -> int:
    message = body.get("error") if isinstance(body, dict) else body
    print(f"error ({status}): {message}", file=sys.stderr)
    return 1


def _output(args: argparse.Namespace, data: Any, text: Callable[[Any], str]) -> int:
    """A door's ``data`` as indented JSON under ``--json``, else as ``text(data)``."""
    print(json.dumps(data, indent=2) if args.json else text(data))
    return 0


def _call(
    settings: ClientSettings, method: str, path: str, body: Any = None, params: dict[str, Any] | None = None
) -> Any:
    """One call of a door: its ``data``. Parameters that are None are not sent; a refusal raises
    ``_Refused`` (``main`` prints it)."""
    query = {k: v for k, v in (params or {}).items() if v is not None}
    with _doors(settings) as client:
        response = client.request(method, path, params=query or None, json=body)
    if response.status_code != 200:
        raise _Refused(response.status_code, _body(response))
    return response.json()["data"]


def _page(args: argparse.Namespace, **filters: Any) -> dict[str, Any]:
    """The query of a paged door: its filters, and ``page``/``pageSize`` only when given (the
    door's defaults apply otherwise)."""
    return {**filters, "page": args.page, "pageSize": args.page_size}


def cmd_list(settings: ClientSettings, args: argparse.Namespace) -> int:
    filters = {"q": args.search, "format": args.format, "group": args.group, "sort": args.sort}
    data = _call(settings, "GET", "/api/interactions", params=_page(args, **filters))
    return _output(args, data, cli_text.interactions_text)


def _frame_line(sse: ServerSentEvent, data: Any, as_json: bool) -> str:
    if as_json:
        return json.dumps({"id": sse.id or None, "event": sse.event, "data": data})
    detail = f"  {data.get('question', '')}" if sse.event == "interaction.add" else ""
    return f"{sse.id:>8}  {sse.event:<22} {data['interaction_id']}{detail}"


def cmd_stream(settings: ClientSettings, args: argparse.Namespace) -> int:
    """Print every frame until interrupted; after a drop, reconnect from the last frame's id."""
    from httpx_sse import connect_sse

    last_id: str | None = None
    try:
        while True:
            headers = {"Last-Event-ID": last_id} if last_id else {}
            try:
                with (
                    _doors(settings, timeout=None) as client,
                    connect_sse(client, "GET", "/api/interactions/stream", headers=headers) as source,
                ):
                    if source.response.status_code != 200:
                        source.response.read()
                        return _fail(source.response.status_code, _body(source.response))
                    for sse in source.iter_sse():
                        if not sse.data:
                            continue  # a keepalive: nothing to print, nothing to resume from
                        last_id = sse.id or last_id
                        if sse.event == "stream.evicted":
                            continue  # too slow for the door: the stream ends; resume from last_id
                        print(_frame_line(sse, json.loads(sse.data), args.json), flush=True)
            except _Unreachable:
                print("stream interrupted; reconnecting...", file=sys.stderr)
                time.sleep(1)
    except KeyboardInterrupt:
        return 0


def cmd_answer(settings: ClientSettings, args: argparse.Namespace) -> int:
    try:
        value = json.loads(args.answer)
    except ValueError as exc:
        print(f"error: --answer must be JSON (quote strings: '\"yes\"'): {exc}", file=sys.stderr)
        return 2
    path = f"/api/interactions/{quote(args.interaction_id, safe='')}/answer"
    data = _call(settings, "POST", path, {"answer": value})
    return _output(args, data, _answered_line)


def _answered_line(data: dict[str, Any]) -> str:
    if data.get("status") == "voted":
        return f"voted on {data['interaction_id']} ({data['votes']} of {data['required']}); it waits for more"
    return f"answered {data['interaction_id']}"


def cmd_delegate(settings: ClientSettings, args: argparse.Namespace) -> int:
    body = {"to": args.to, **({"note": args.note} if args.note is not None else {})}
    data = _call(settings, "POST", f"/api/interactions/{quote(args.interaction_id, safe='')}/delegate", body)
    return _output(args, data, lambda d: f"handed {d['interaction_id']} on to {d['to']}")


def cmd_history(settings: ClientSettings, args: argparse.Namespace) -> int:
    data = _call(settings, "GET", f"/api/interactions/{quote(args.interaction_id, safe='')}/history")
    return _output(args, data, cli_text.history_text)


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
        routing = _json_option("--routing", args.routing)
        channel, recipient = _channel_options(args.channel, args.recipient)
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
                channel=channel,
                recipient=recipient,
                on_mismatch=args.on_mismatch,
                mismatch_notice=args.mismatch_notice,
                routing=routing,
            )

    try:
        answer = asyncio.run(run())
    except (LaybyError, ValueError, RuntimeError, TimeoutError, PermissionError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    print(json.dumps(answer))
    return 0


def _channel_options(
    channels: list[str] | None, recipients: list[str] | None
) -> tuple[str | list[str] | None, str | dict[str, str] | None]:
    """``--channel`` (repeatable) and ``--recipient`` as ``ask_user`` takes them: one channel and
    its recipient, or a list of channels and ``CHANNEL=RECIPIENT`` pairs."""
    if not channels:
        if recipients:
            raise ValueError("--recipient needs --channel")
        return None, None
    if len(channels) == 1:
        if recipients and len(recipients) > 1:
            raise ValueError("one --channel takes one --recipient")
        return channels[0], recipients[0] if recipients else None
    pairs: dict[str, str] = {}
    for entry in recipients or []:
        name, sep, value = entry.partition("=")
        if not sep or not name or not value:
            raise ValueError(f"with several --channel, --recipient is CHANNEL=RECIPIENT, not {entry!r}")
        pairs[name] = value
    return channels, pairs or None


def cmd_notifications_list(settings: ClientSettings, args: argparse.Namespace) -> int:
    data = _call(settings, "GET", "/api/notifications")
    return _output(args, data, cli_text.notifications_text)


_NOTIFY_SHAPES: dict[str, tuple[type, str]] = {
    "--media": (list, 'a JSON list of media items ([{"kind": ..., "url": ...}])'),
    "--template": (dict, 'a JSON object ({"name": ..., "language": ..., "parameters": [...]})'),
    "--options": (list, 'a JSON list of strings (["Yes", "No"])'),
}


def _notify_option(name: str, raw: str | None) -> Any:
    """A JSON option of ``notifications notify``, its shape checked here (the server enforces the
    rest: caps, exclusivity, what the channel supports)."""
    value = _json_option(name, raw)
    if value is None:
        return None
    kind, shape = _NOTIFY_SHAPES[name]
    item = {"--media": dict, "--options": str}.get(name)
    if isinstance(value, dict) and kind is dict:
        return value
    if isinstance(value, list) and kind is list and (item is None or all(isinstance(v, item) for v in value)):
        return value
    raise ValueError(f"{name} must be {shape}")


def cmd_notifications_notify(settings: ClientSettings, args: argparse.Namespace) -> int:
    try:
        extra = {
            "media": _notify_option("--media", args.media),
            "template": _notify_option("--template", args.template),
            "options": _notify_option("--options", args.options),
        }
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    body = {"message": args.message, "channel": args.channel, "recipient": args.recipient, **extra}
    data = _call(settings, "POST", "/api/notifications", {k: v for k, v in body.items() if v is not None})
    return _output(args, data, str)


def cmd_runs_list(settings: ClientSettings, args: argparse.Namespace) -> int:
    data = _call(settings, "GET", "/api/runs", params=_page(args, status=args.status))
    return _output(args, data, cli_text.runs_text)


def cmd_runs_timeline(settings: ClientSettings, args: argparse.Namespace) -> int:
    query = {k: v for k, v in (("page", args.page), ("pageSize", args.page_size)) if v is not None}
    path = f"/api/runs/{quote(args.run_id, safe='')}/timeline"
    if query:
        path += "?" + "&".join(f"{k}={v}" for k, v in query.items())
    data = _call(settings, "GET", path)
    return _output(args, data, cli_text.timeline_text)


def cmd_runs_show(settings: ClientSettings, args: argparse.Namespace) -> int:
    data = _call(settings, "GET", f"/api/runs/{quote(args.run_id, safe='')}")
    return _output(args, data, cli_text.run_text)


def _run_action(settings: ClientSettings, args: argparse.Namespace, action: str) -> int:
    data = _call(settings, "POST", f"/api/runs/{quote(args.run_id, safe='')}/{action}")
    return _output(args, data, lambda d: f"{d['run_id']} {d['status']}")


def cmd_runs_cancel(settings: ClientSettings, args: argparse.Namespace) -> int:
    return _run_action(settings, args, "cancel")


def cmd_runs_retry(settings: ClientSettings, args: argparse.Namespace) -> int:
    return _run_action(settings, args, "retry")


MOVABLE_STATUSES = ("parked", "resumed", "failed")


def _runs_on(settings: ClientSettings, flow: str, version: int) -> list[str]:
    """Every run of ``flow`` on ``version`` that can be moved (parked, waiting, failed)."""
    found: list[str] = []
    for status in MOVABLE_STATUSES:
        page: int | None = 1
        while page is not None:
            data = _call(
                settings,
                "GET",
                "/api/runs",
                params={"flow": flow, "status": status, "page": page, "pageSize": 100},
            )
            found += [r["run_id"] for r in data["items"] if r.get("version", 1) == version]
            page = data.get("next_page")
    return found


def cmd_runs_migrate(settings: ClientSettings, args: argparse.Namespace) -> int:
    """Move runs to another version of their flow, each recorded on its log (docs/versions.md#moving-runs)."""
    if bool(args.run_ids) == (args.flow is not None):
        print(
            "error: name runs to move, or --flow and --from (every movable run on that version)",
            file=sys.stderr,
        )
        return 2
    if args.flow is not None and args.from_version is None:
        print("error: --flow needs --from: the version its runs are on now", file=sys.stderr)
        return 2
    run_ids = args.run_ids or _runs_on(settings, args.flow, args.from_version)
    moved = []
    for run_id in run_ids:
        data = _call(settings, "POST", f"/api/runs/{quote(run_id, safe='')}/move", {"version": args.to})
        moved.append(data)
        if not args.json:
            was = f"from version {data['from_version']}" if data["from_version"] is not None else "already"
            print(f"{run_id} {data['status']} on version {data['version']} ({was})")
    if args.json:
        print(json.dumps(moved, indent=2))
    elif not run_ids:
        print(f"no parked, waiting or failed run of {args.flow} is on version {args.from_version}")
    return 0


def cmd_workers(settings: ClientSettings, args: argparse.Namespace) -> int:
    return _output(args, _call(settings, "GET", "/api/workers"), cli_text.workers_text)


def _spec_text(args: argparse.Namespace) -> str:
    """The definition ``layby doors put`` sends: ``--spec`` itself, or the file ``--file`` names
    (``-``: standard input). It is sent as written, so the door's own checks (a repeated key, an
    unknown one) apply to exactly what the file says."""
    if args.spec is not None:
        return str(args.spec)
    if args.file == "-":
        return sys.stdin.read()
    with open(args.file, encoding="utf-8") as spec:
        return spec.read()


def cmd_doors_put(settings: ClientSettings, args: argparse.Namespace) -> int:
    try:
        text = _spec_text(args)
        json.loads(text)
    except OSError as exc:
        print(f"error: cannot read {args.file}: {exc.strerror}", file=sys.stderr)
        return 2
    except ValueError as exc:
        print(f"error: the definition must be JSON: {exc}", file=sys.stderr)
        return 2
    headers = {"Content-Type": "application/json"}
    with _doors(settings) as client:
        response = client.put(
            f"/api/doors/{quote(args.name, safe='')}", content=text.encode(), headers=headers
        )
    if response.status_code != 200:
        raise _Refused(response.status_code, _body(response))
    data = response.json()["data"]
    return _output(args, data, lambda d: f"saved {d['name']} ({d['spec']['kind']} -> {d['spec']['target']})")


def cmd_doors_list(settings: ClientSettings, args: argparse.Namespace) -> int:
    return _output(args, _call(settings, "GET", "/api/doors", params=_page(args)), cli_text.doors_text)


def cmd_doors_show(settings: ClientSettings, args: argparse.Namespace) -> int:
    """A definition is JSON: shown as the door's ``data``, indented, with or without ``--json``."""
    data = _call(settings, "GET", f"/api/doors/{quote(args.name, safe='')}")
    print(json.dumps(data, indent=2))
    return 0


def cmd_doors_delete(settings: ClientSettings, args: argparse.Namespace) -> int:
    data = _call(settings, "DELETE", f"/api/doors/{quote(args.name, safe='')}")
    return _output(args, data, lambda d: f"deleted {d['name']}")


def cmd_runs_start(settings: ClientSettings, args: argparse.Namespace) -> int:
    from layby.sdk import connect

    try:
        value = json.loads(args.input) if args.input is not None else None
    except ValueError as exc:
        print(f"error: --input must be JSON: {exc}", file=sys.stderr)
        return 2

    async def run() -> str:
        async with await connect(settings=settings) as client:
            return await client.start_run(args.flow, value, run_id=args.run_id, version=args.version)

    try:
        run_id = asyncio.run(run())
    except (LaybyError, ValueError, RuntimeError, TimeoutError, PermissionError) as exc:
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

    try:
        # A worker spends most of its time in the event loop and its sockets: on uvloop where the
        # server's packages installed it (docs/cli.md), on asyncio's own loop otherwise.
        import uvloop
    except ImportError:
        asyncio.run(run())
    else:
        uvloop.run(run())
    return 0


def cmd_mcp(settings: ClientSettings, args: argparse.Namespace) -> int:
    """``layby mcp``: the MCP server (docs/mcp.md); needs the ``mcp`` extra."""
    try:
        from layby.mcp import serve_http, serve_stdio
    except ImportError as exc:
        raise CliError(f"`layby mcp` needs the mcp extra (pip install 'layby-server[mcp]'): {exc}") from None
    # Standard error is an MCP client's log of this server: the SDK's waits stay at debug there.
    configure_logging(settings.log_format, settings.log_level)
    try:
        if args.http:
            asyncio.run(serve_http(settings, host=args.host, port=args.port))
        else:
            asyncio.run(serve_stdio(settings))
    except (RuntimeError, LaybyError) as exc:  # no NATS URL or token, NATS unreachable
        raise CliError(str(exc)) from None
    except KeyboardInterrupt:
        pass
    return 0


COMMANDS = {
    ("interactions", "list"): cmd_list,
    ("interactions", "stream"): cmd_stream,
    ("interactions", "answer"): cmd_answer,
    ("interactions", "history"): cmd_history,
    ("interactions", "delegate"): cmd_delegate,
    ("ask", None): cmd_ask,
    ("runs", "list"): cmd_runs_list,
    ("runs", "show"): cmd_runs_show,
    ("runs", "timeline"): cmd_runs_timeline,
    ("runs", "start"): cmd_runs_start,
    ("runs", "cancel"): cmd_runs_cancel,
    ("runs", "retry"): cmd_runs_retry,
    ("runs", "migrate"): cmd_runs_migrate,
    ("doors", "put"): cmd_doors_put,
    ("doors", "list"): cmd_doors_list,
    ("doors", "show"): cmd_doors_show,
    ("doors", "delete"): cmd_doors_delete,
    ("notifications", "list"): cmd_notifications_list,
    ("notifications", "notify"): cmd_notifications_notify,
    ("workers", None): cmd_workers,
    ("worker", None): cmd_worker,
    ("mcp", None): cmd_mcp,
}


Handler = Callable[[ClientSettings, argparse.Namespace], int]
Register = Callable[[Any], dict[tuple[str, str | None], Handler]]

SERVER_COMMANDS = (
    "up",
    "serve",
    "migrate",
    "projections",
    "backup",
    "restore",
    "nats-config",
    "doctor",
    "contract",
    "secrets-key",
)
"""Every command the server distribution adds (``layby.cli`` entry points); named here so that an
SDK-only install says what is missing instead of "invalid choice"."""


def _plugins(sub: Any) -> dict[tuple[str, str | None], Handler]:
    """Commands of installed distributions that extend the CLI (the server registers its own)."""
    commands: dict[tuple[str, str | None], Handler] = {}
    for entry in entry_points(group="layby.cli"):
        register: Register = entry.load()
        commands.update(register(sub))
    return commands


def _server_missing(name: str) -> int:
    print(
        f"error: 'layby {name}' is a server command; this install has the SDK only "
        "(install the whole system from the repository: pip install -e .)",
        file=sys.stderr,
    )
    return 2


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    commands = {**COMMANDS, **_plugins(sub)}
    missing = [name for name in SERVER_COMMANDS if not any(key[0] == name for key in commands)]
    for name in missing:
        sub.add_parser(name, help="(server) not installed")
    if argv and argv[0] in missing:
        # Before parsing: whatever follows (`--keys`, a service name) belongs to the missing command.
        return _server_missing(argv[0])
    args = parser.parse_args(argv)
    try:
        settings = load_client_settings()
    except SettingsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    # The CLI's output is its answer (often JSON for a script): log lines go to stderr.
    configure_logging(settings.log_format, settings.log_level, shown=SHOWN_EVENTS)
    handler = commands[(args.command, getattr(args, "action", None))]
    try:
        return handler(settings, args)
    except _Refused as refused:
        return _fail(refused.status, refused.body)
    except (CliError, SettingsError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2 if isinstance(exc, SettingsError) else 1
    except msgspec.DecodeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
