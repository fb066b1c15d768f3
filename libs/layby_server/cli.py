"""The server's commands of the ``layby`` CLI: ``up``, ``serve``, ``migrate``, ``projections rebuild``,
``backup``, ``restore``...

The SDK's CLI finds them through the ``layby.cli`` entry-point group, so an SDK-only install has
the client commands only.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import sys
from typing import Any

from layby.settings import ClientSettings
from layby_server.settings import load_settings

SERVICES = ("ask", "door", "delivery", "resume", "sweeper")
ADMIN_CONNECT_TIMEOUT = 15.0


def cmd_serve(_client: ClientSettings, args: argparse.Namespace) -> int:
    module = importlib.import_module(f"layby_services.{args.service}.main")
    module.main()
    return 0


def cmd_up(_client: ClientSettings, args: argparse.Namespace) -> int:
    from layby_server.operations.up import Shape, up

    return up(load_settings(), shape=Shape(nats_nodes=args.nats_cluster, replicas=args.replicas))


def _at_least_one(raw: str) -> int:
    try:
        value = int(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, got {raw!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def cmd_rebuild(_client: ClientSettings, _args: argparse.Namespace) -> int:
    from layby_server.projection.projector import rebuild
    from layby_server.service import open_resources

    settings = load_settings()

    async def run() -> int:
        async with open_resources(settings, name="rebuild") as res:
            assert res.pool is not None
            return await rebuild(
                res.pool, res.store, waiting_retention=settings.waiting_outcome_retention_seconds
            )

    count = asyncio.run(run())
    print(f"projections rebuilt from {count} events")
    return 0


def cmd_migrate(_client: ClientSettings, _args: argparse.Namespace) -> int:
    """Apply the SQL migrations to LAYBY_DB_SCHEMA and exit (a deployment's pre-upgrade step).

    Every service migrates when it opens its pool too; running it once before the new version's
    pods start means they never race an old version over the schema (docs/kubernetes.md#upgrades)."""
    from layby_contracts.errors import Permanent
    from layby_server.operations.runtime import resolve_urls
    from layby_server.projection.db import open_pool

    settings = load_settings()
    _, db_url = resolve_urls(settings)
    if db_url is None:
        print("error: LAYBY_DATABASE_URL must be set: it is the database to migrate", file=sys.stderr)
        return 2

    async def run() -> None:
        pool = await open_pool(db_url, settings.db_schema)
        await pool.close()

    try:
        asyncio.run(run())
    except Permanent as exc:  # a URL that can never work: say so, the Job does not retry it
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"schema {settings.db_schema} migrated", file=sys.stderr)
    return 0


def _progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


async def _admin_nats(settings: Any, nats_url: str) -> Any:
    """A NATS connection with the admin key (snapshots, restores and stream deletes are admin's)."""
    import nats.errors

    from layby.connection import connect_nats
    from layby.natskeys import service_inbox
    from layby_contracts.errors import Unavailable
    from layby_server.operations.runtime import resolve_seed
    from layby_server.store.eventstore import wait_for_jetstream

    nc = await connect_nats(
        nats_url,
        name="layby-admin",
        first_connect_timeout=ADMIN_CONNECT_TIMEOUT,  # an operator's command fails fast, naming the URL
        seed=resolve_seed(settings, "admin"),
        inbox_prefix=service_inbox("admin"),
        ca_file=settings.nats_ca_file,
    )
    try:
        await wait_for_jetstream(nc, timeout=ADMIN_CONNECT_TIMEOUT)
    except (nats.errors.Error, TimeoutError):
        await nc.close()
        raise Unavailable(f"JetStream at {nats_url} (LAYBY_NATS_URL) did not answer") from None
    return nc


def _run_admin(main: Any) -> int:
    """Run an admin command's coroutine; a refusal or failure is one ``error:`` line (status 1)."""
    import nats.errors

    from layby.settings import SettingsError
    from layby_contracts.errors import LaybyError
    from layby_server.operations.backup import BackupError

    try:
        asyncio.run(main())
    except (BackupError, SettingsError, LaybyError, nats.errors.Error, TimeoutError) as exc:
        print(f"error: {exc or type(exc).__name__}", file=sys.stderr)
        return 1
    return 0


def cmd_backup(_client: ClientSettings, args: argparse.Namespace) -> int:
    """Snapshot every stream of LAYBY_NAMESPACE into a folder (docs/operations.md#backup-and-restore)."""
    from pathlib import Path

    from layby_server.operations.backup import take_backup
    from layby_server.operations.runtime import resolve_urls

    settings = load_settings()
    nats_url, _ = resolve_urls(settings)
    if nats_url is None:
        print("error: LAYBY_NATS_URL must be set: it is the server to back up", file=sys.stderr)
        return 2

    async def run() -> None:
        nc = await _admin_nats(settings, nats_url)
        try:
            manifest = await take_backup(nc, settings.names, Path(args.dir), _progress)
        finally:
            await nc.close()
        streams = len(manifest.streams)
        _progress(f"backup of namespace {manifest.namespace} written to {args.dir} ({streams} streams)")

    return _run_admin(run)


def cmd_restore(_client: ClientSettings, args: argparse.Namespace) -> int:
    """Restore a backup's streams, then rebuild PostgreSQL from them
    (docs/operations.md#backup-and-restore)."""
    from pathlib import Path

    from layby_server.operations.backup import load_backup
    from layby_server.operations.restore import restore_namespace
    from layby_server.operations.runtime import resolve_urls

    settings = load_settings()
    nats_url, db_url = resolve_urls(settings)
    if nats_url is None or db_url is None:
        print(
            "error: LAYBY_NATS_URL and LAYBY_DATABASE_URL must be set: the streams are restored to "
            "NATS and the projections rebuilt in PostgreSQL",
            file=sys.stderr,
        )
        return 2
    directory = Path(args.dir)

    async def run() -> None:
        manifest = load_backup(directory, settings.names)  # every checksum, before anything is touched
        _progress(
            f"backup of namespace {manifest.namespace} taken {manifest.created_at.isoformat()} by Layby "
            f"{manifest.layby_version}: {len(manifest.streams)} streams, checksums verified"
        )
        nc = await _admin_nats(settings, nats_url)
        try:
            await restore_namespace(
                nc, settings, db_url, manifest, directory, force=args.force, progress=_progress
            )
        finally:
            await nc.close()
        _progress(f"restore of namespace {manifest.namespace} complete: start the services")

    return _run_admin(run)


def cmd_nats_config(_client: ClientSettings, args: argparse.Namespace) -> int:
    """Write the NATS authorization block for LAYBY_API_TOKENS and every service role's key."""
    from pathlib import Path

    from layby_server.operations.natsauth import authorization_for

    settings = load_settings()
    if not settings.api_tokens:
        print("error: LAYBY_API_TOKENS must be set: every token is a NATS key", file=sys.stderr)
        return 2
    text, _ = authorization_for(settings.names, Path(args.keys), settings.api_tokens)
    if args.out == "-":
        sys.stdout.write(text)
    else:
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.touch(mode=0o600)
        out.write_text(text, encoding="utf-8")
        print(f"wrote {out}; service keys in {args.keys}/<role>.seed", file=sys.stderr)
    return 0


def cmd_doctor(_client: ClientSettings, args: argparse.Namespace) -> int:
    """Check the installation; exit 1 when a check failed (docs/operations.md#layby-doctor)."""
    import msgspec

    from layby_server.operations.doctor import diagnose, reach_from, render

    settings = load_settings()

    async def run() -> Any:
        async with reach_from(settings) as reach:
            return await diagnose(reach)

    report = asyncio.run(run())
    if args.json:
        print(msgspec.json.encode(report).decode())
    else:
        print(render(report))
    return 0 if report.ok else 1


def cmd_contract(_client: ClientSettings, args: argparse.Namespace) -> int:
    """Write the contract's documents (the bus's and the doors' OpenAPI document), or with
    ``--check`` say which are stale (docs/bus.md)."""
    from pathlib import Path

    from layby_server.operations.busdoc import OPENAPI_FILE, SCHEMA_DIR, BusContractError, check, write

    # The door generates its own document; like `layby serve`, reached by name from this layer.
    extra = {OPENAPI_FILE: importlib.import_module("layby_services.door.openapi").document()}
    directory = Path(args.dir) if args.dir else SCHEMA_DIR
    try:
        stale = check(directory, extra) if args.check else write(directory, extra)
    except BusContractError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if args.check and stale:
        print(
            f"error: {', '.join(stale)} in {directory} do not match the contracts: run `layby contract`",
            file=sys.stderr,
        )
        return 1
    print(f"{'up to date' if not stale else 'wrote ' + ', '.join(stale)} ({directory})")
    return 0


def cmd_secrets_key(_client: ClientSettings, _args: argparse.Namespace) -> int:
    from layby_server.store.sealing import new_key

    print(new_key())
    return 0


def register(sub: Any) -> dict[tuple[str, str | None], Any]:
    """Add the server's sub-commands to the CLI's parser; return their handlers."""
    up = sub.add_parser("up", help="run the whole system (embedded NATS and PostgreSQL when no URLs are set)")
    up.add_argument(
        "--nats-cluster",
        type=_at_least_one,
        default=1,
        metavar="N",
        help="run N embedded NATS nodes as one JetStream cluster, every stream on 3 of them "
        "(docs/reliability.md#the-cluster-on-one-machine)",
    )
    up.add_argument(
        "--replicas",
        type=_at_least_one,
        default=1,
        metavar="K",
        help="run K processes of each service (the door's share the HTTP port)",
    )
    serve = sub.add_parser("serve", help="run one service")
    serve.add_argument("service", choices=SERVICES)
    sub.add_parser("migrate", help="apply the SQL migrations to the PostgreSQL schema and exit")
    proj = sub.add_parser("projections", help="maintain the PostgreSQL read models").add_subparsers(
        dest="action", required=True
    )
    proj.add_parser("rebuild", help="drop the projections and replay them from the event log")
    nats = sub.add_parser(
        "nats-config",
        help="write NATS's authorization block: one key per service role and per API token",
    )
    nats.add_argument(
        "--keys", required=True, help="folder of the service keys (<role>.seed; created when missing)"
    )
    nats.add_argument("--out", default="-", help="file to write (default: standard output)")
    doctor = sub.add_parser(
        "doctor",
        help="check the installation: NATS, PostgreSQL, the services, clocks, the public URL, "
        "channels, secrets (docs/operations.md#layby-doctor)",
    )
    doctor.add_argument("--json", action="store_true", help="print the report as JSON")
    contract = sub.add_parser(
        "contract",
        help="write the contract documents from the code: the NATS bus's JSON Schema and AsyncAPI, "
        "and the doors' OpenAPI (docs/bus.md)",
    )
    contract.add_argument("--check", action="store_true", help="only say whether the files are up to date")
    contract.add_argument(
        "--dir", help="where the documents live (default: this checkout's contracts/schema)"
    )
    sub.add_parser("secrets-key", help="print a new LAYBY_SECRETS_KEY (seals sensitive answers at rest)")
    backup = sub.add_parser("backup", help="snapshot every stream of the namespace into a folder")
    backup.add_argument("dir", help="folder to write (created; must not hold a backup already)")
    restore = sub.add_parser(
        "restore", help="restore a backup's streams and rebuild the PostgreSQL projections from them"
    )
    restore.add_argument("dir", help="folder of a backup written by `layby backup`")
    restore.add_argument(
        "--force", action="store_true", help="replace streams of the namespace that hold messages"
    )
    return {
        ("secrets-key", None): cmd_secrets_key,
        ("up", None): cmd_up,
        ("serve", None): cmd_serve,
        ("migrate", None): cmd_migrate,
        ("projections", "rebuild"): cmd_rebuild,
        ("nats-config", None): cmd_nats_config,
        ("doctor", None): cmd_doctor,
        ("contract", None): cmd_contract,
        ("backup", None): cmd_backup,
        ("restore", None): cmd_restore,
    }
