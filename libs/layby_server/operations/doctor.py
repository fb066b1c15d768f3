"""``layby doctor`` and ``GET /api/doctor``: check an installation, each finding with its fix
(docs/operations.md#layby-doctor).

The checks read; they never write to the log or the database. Each is one function from what it
can reach (``Reach``) to one or more ``DoctorCheck``; a check that cannot run (NATS down, nothing
configured) says ``skip`` and why instead of failing twice. ``fail`` means people will notice (a
question nobody can answer, an acknowledged event a node loss can take); ``warn`` means it works but
not as a production installation should.

Where a fact lives:

- NATS's own settings (``sync_interval: always``, the cluster's size, its clock) only on its
  monitoring port (``/varz``, ``/jsz``): ``LAYBY_NATS_MONITOR_URL`` names it; without it those
  checks say they cannot tell. Whether it demands credentials is in the ``INFO`` line every NATS
  server sends a client that opens a socket, read here without logging in.
- The services answer a core NATS ping (``Names.doctor_ping``) with their clocks.
- The public base URL is proven by a nonce: the doctor asks ``GET {public}/api/doctor/probe/{nonce}``
  and listens on NATS for a door of this installation saying it served that nonce. A proxy's
  default page, another installation or a stale DNS record answers HTTP but never on our NATS.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

import asyncpg
import httpx
import msgspec
from nats.aio.client import Client as NATS

from layby.connection import servers
from layby_contracts.commands import PROTOCOL
from layby_contracts.doctor import ServiceSeen
from layby_contracts.http.doctor import CheckStatus, DoctorCheck, DoctorReport
from layby_domain.verifiers import parse_secrets
from layby_domain.webhooks import parse_webhook_secrets
from layby_server.channels import load_channels, parse_channels
from layby_server.projection.db import migrations
from layby_server.settings import Settings
from layby_server.store.streams import stream_names

__all__ = [
    "CLOCK_FAIL_SECONDS",
    "CLOCK_WARN_SECONDS",
    "SERVICES",
    "Reach",
    "diagnose",
    "reach_from",
    "render",
]

SERVICES = ("ask", "door", "delivery", "resume", "sweeper")
WHY_NEEDED = {
    "ask": "no ask is recorded",
    "door": "nobody can answer in the inbox or through a callback",
    "delivery": "no question reaches a channel, no webhook is sent",
    "resume": "no parked run resumes",
    "sweeper": "no deadline passes, no escalation or reminder fires",
}
CLOCK_WARN_SECONDS = 0.25
CLOCK_FAIL_SECONDS = 1.0
"""Deadlines, escalations and expiries are decided by the clocks of the services that record them:
two clocks a second apart move them by a second."""
PING_WINDOW_SECONDS = 0.75
"""How long the doctor collects the services' answers to its ping."""
PROBE_WAIT_SECONDS = 3.0
"""How long it waits, after the public URL answered, for a door to say it served the nonce."""
HTTP_TIMEOUT_SECONDS = 5.0
NEEDED_REPLICAS_CAP = 3


@dataclass
class Reach:
    """What the checks may use. ``nc`` and ``pool`` are open connections (None: unreachable or not
    configured; ``nats_error``/``db_error`` say why); ``wall`` is the clock compared with the others
    (injectable so a test can set it off)."""

    settings: Settings
    nats_url: str | None
    db_url: str | None
    nc: NATS | None = None
    nats_error: str | None = None
    pool: asyncpg.Pool | None = None
    db_error: str | None = None
    monitor_urls: Sequence[str] = ()
    wall: Callable[[], float] = time.time
    http: Callable[[], httpx.AsyncClient] = field(
        default=lambda: httpx.AsyncClient(timeout=HTTP_TIMEOUT_SECONDS, follow_redirects=False)
    )
    clocks: list[tuple[str, float, float]] = field(default_factory=list)
    """Offsets found along the way: (whose clock, offset in seconds, uncertainty)."""
    monitor: dict[str, dict[str, Any] | str] = field(default_factory=dict)
    """Each monitoring URL's ``/varz``, or why it could not be read."""


def _check(name: str, status: CheckStatus, detail: str, fix: str | None = None) -> DoctorCheck:
    return DoctorCheck(name=name, status=status, detail=detail, fix=None if status == "ok" else fix)


# -- NATS ---------------------------------------------------------------------------------------


async def server_info(url: str, timeout: float = HTTP_TIMEOUT_SECONDS) -> dict[str, Any]:
    """The JSON of the ``INFO`` line a NATS server sends every socket first, before any login."""
    parts = urlsplit(url if "://" in url else f"nats://{url}")
    reader, writer = await asyncio.wait_for(
        asyncio.open_connection(parts.hostname or "127.0.0.1", parts.port or 4222), timeout
    )
    try:
        line = await asyncio.wait_for(reader.readline(), timeout)
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
    verb, _, body = line.decode("utf-8", "replace").partition(" ")
    if verb != "INFO":
        raise ValueError(f"not a NATS server: it opened with {verb[:20]!r}")
    info: dict[str, Any] = json.loads(body)
    return info


async def _read_monitor(reach: Reach, path: str) -> dict[str, dict[str, Any] | str]:
    found: dict[str, dict[str, Any] | str] = {}
    async with reach.http() as client:
        for base in reach.monitor_urls:
            url = base.rstrip("/") + path
            try:
                sent = reach.wall()
                response = await client.get(url)
                received = reach.wall()
                response.raise_for_status()
                body = response.json()
            except (httpx.HTTPError, ValueError) as exc:
                found[base] = f"{url}: {type(exc).__name__} {exc}".strip()
                continue
            body["_sent"], body["_received"] = sent, received
            found[base] = body
    return found


def _nats_reachable(reach: Reach) -> DoctorCheck:
    if reach.nats_url is None:
        return _check(
            "nats.reachable",
            "fail",
            "no NATS URL: LAYBY_NATS_URL is not set and no `layby up` is running here",
            "set LAYBY_NATS_URL to the installation's NATS (or run this beside `layby up`)",
        )
    if reach.nc is None:
        return _check(
            "nats.reachable",
            "fail",
            f"NATS at {reach.nats_url} did not answer: {reach.nats_error}",
            "check LAYBY_NATS_URL, the network path, LAYBY_NATS_SEED and LAYBY_NATS_CA_FILE",
        )
    v = reach.nc.connected_server_version
    version = f"{v.major}.{v.minor}.{v.patch}"
    return _check("nats.reachable", "ok", f"JetStream answers at {reach.nats_url} (NATS {version})")


async def _nats_authorization(reach: Reach) -> DoctorCheck:
    if reach.nats_url is None:
        return _check("nats.authorization", "skip", "no NATS URL")
    open_servers: list[str] = []
    for address in servers(reach.nats_url):
        try:
            info = await server_info(address)
        except (OSError, ValueError, TimeoutError) as exc:
            return _check("nats.authorization", "skip", f"{address} did not say hello: {exc}")
        if not info.get("auth_required"):
            open_servers.append(address)
    if open_servers:
        return _check(
            "nats.authorization",
            "fail",
            f"{', '.join(open_servers)} accepts connections without credentials: anyone who reaches "
            "it can publish answers and read every question",
            "give NATS an authorization block (`layby nats-config` writes one for the services and "
            "tokens) and each service its key (LAYBY_NATS_SEED); docs/security.md#nats-identities",
        )
    return _check("nats.authorization", "ok", "NATS demands credentials of every connection")


def _no_monitor(name: str, what: str) -> DoctorCheck:
    return _check(
        name,
        "warn",
        f"cannot tell {what}: LAYBY_NATS_MONITOR_URL is not set",
        "expose NATS's monitoring port (`http: 8222` in its configuration) to the services and set "
        "LAYBY_NATS_MONITOR_URL (every node's, comma-separated), or confirm it by hand",
    )


def _nats_sync(reach: Reach) -> DoctorCheck:
    if not reach.monitor_urls:
        return _no_monitor("nats.sync", "whether JetStream syncs every append")
    lagging: list[str] = []
    unreadable: list[str] = []
    for base, varz in reach.monitor.items():
        if isinstance(varz, str):
            unreadable.append(varz)
            continue
        config = (varz.get("jetstream") or {}).get("config") or {}
        if not config.get("sync_always"):
            version = varz.get("version", "?")
            interval = config.get("sync_interval")
            seconds = (
                f"every {interval / 1e9:g} s" if isinstance(interval, int | float) else "on its own schedule"
            )
            lagging.append(f"{base} (NATS {version}) syncs {seconds}")
    if lagging:
        return _check(
            "nats.sync",
            "fail",
            "JetStream acknowledges appends before they are on disk: "
            + "; ".join(lagging)
            + " — a power loss can take answers already confirmed",
            "set `jetstream { sync_interval: always }` on every node (NATS 2.10 or newer) and restart "
            "it; docs/reliability.md#what-it-needs",
        )
    if unreadable:
        return _check(
            "nats.sync",
            "warn",
            "monitoring did not answer: " + "; ".join(unreadable),
            "check LAYBY_NATS_MONITOR_URL",
        )
    return _check("nats.sync", "ok", f"sync_interval: always on {len(reach.monitor)} node(s)")


async def _cluster_size(reach: Reach) -> tuple[int, str]:
    """How many JetStream nodes, and how that was learned."""
    if reach.monitor_urls:
        jsz = await _read_monitor(reach, "/jsz")
        for body in jsz.values():
            if isinstance(body, dict):
                meta = body.get("meta_cluster") or {}
                size = meta.get("cluster_size")
                if isinstance(size, int) and size > 0:
                    return size, "its meta group"
                return 1, "its monitoring (no cluster)"
    if reach.nats_url is not None:
        with contextlib.suppress(OSError, ValueError, TimeoutError):
            info = await server_info(servers(reach.nats_url)[0])
            if info.get("cluster"):
                urls = {u for u in info.get("connect_urls") or [] if isinstance(u, str)}
                return max(len(urls), 1), "the servers it announces"
            return 1, "its hello (no cluster)"
    return 1, "nothing (assumed one node)"


async def _nats_replicas(reach: Reach) -> DoctorCheck:
    if reach.nc is None:
        return _check("nats.replicas", "skip", "NATS is not reachable")
    size, source = await _cluster_size(reach)
    needed = min(NEEDED_REPLICAS_CAP, size)
    js = reach.nc.jetstream()
    found: dict[str, int] = {}
    missing: list[str] = []
    for name in stream_names(reach.settings.names):
        try:
            info = await js.stream_info(name)
        except Exception:  # noqa: BLE001 - a stream not yet made (no service started) is reported
            missing.append(name)
            continue
        found[name] = info.config.num_replicas or 1
    if not found:
        return _check(
            "nats.replicas",
            "fail",
            f"none of the namespace {reach.settings.namespace!r}'s streams exist",
            "start the services (they make the streams) or check LAYBY_NAMESPACE",
        )
    short = sorted(n for n, r in found.items() if r < needed)
    if short:
        return _check(
            "nats.replicas",
            "fail",
            f"{len(short)} stream(s) keep fewer than {needed} replicas on a cluster of {size} "
            f"(learned from {source}): {', '.join(f'{n} R{found[n]}' for n in short)} — losing one "
            "node loses acknowledged events",
            f"set LAYBY_STREAM_REPLICAS={needed} and restart the services: they raise each stream's "
            "replicas at start (docs/reliability.md#what-it-needs)",
        )
    configured = reach.settings.stream_replicas
    other = sorted(n for n, r in found.items() if r != configured)
    if other:
        return _check(
            "nats.replicas",
            "warn",
            f"LAYBY_STREAM_REPLICAS is {configured} here but {', '.join(f'{n} R{found[n]}' for n in other)}",
            "give every service and this command the same LAYBY_STREAM_REPLICAS",
        )
    note = f"; {len(missing)} not made yet" if missing else ""
    replicas = sorted(set(found.values()))
    return _check(
        "nats.replicas",
        "ok",
        f"{len(found)} streams at R{'/'.join(map(str, replicas))} on {size} node(s) (from {source}){note}",
    )


# -- PostgreSQL ---------------------------------------------------------------------------------


def _postgres_reachable(reach: Reach) -> DoctorCheck:
    if reach.db_url is None:
        return _check(
            "postgres.reachable",
            "fail",
            "no database URL: LAYBY_DATABASE_URL is not set and no `layby up` is running here",
            "set LAYBY_DATABASE_URL",
        )
    if reach.pool is None:
        return _check(
            "postgres.reachable",
            "fail",
            f"PostgreSQL did not answer: {reach.db_error}",
            "check LAYBY_DATABASE_URL (host, port, user, database) and the network path",
        )
    return _check("postgres.reachable", "ok", f"PostgreSQL answers (schema {reach.settings.db_schema!r})")


async def _postgres_migrations(reach: Reach) -> DoctorCheck:
    if reach.pool is None:
        return _check("postgres.migrations", "skip", "PostgreSQL is not reachable")
    schema = reach.settings.db_schema
    shipped = {m.version: m for m in migrations()}
    async with reach.pool.acquire() as conn:
        table = await conn.fetchval("SELECT to_regclass($1)", f'"{schema}".schema_migrations')
        if table is None:
            return _check(
                "postgres.migrations",
                "fail",
                f"the schema {schema!r} has no migrations applied",
                "run `layby migrate` (or start any service: each migrates at start)",
            )
        rows = await conn.fetch(f'SELECT version, checksum FROM "{schema}".schema_migrations')  # noqa: S608 - a checked name
    recorded = {r["version"]: r["checksum"] for r in rows}
    unknown = sorted(set(recorded) - set(shipped))
    if unknown:
        return _check(
            "postgres.migrations",
            "fail",
            f"the database records migration(s) {unknown} that this build does not ship: it is "
            "older than the database",
            "run the version that wrote them (every service and this command the same version)",
        )
    changed = sorted(v for v, c in recorded.items() if shipped[v].checksum != c)
    if changed:
        return _check(
            "postgres.migrations",
            "fail",
            f"migration(s) {changed} changed after they were applied",
            "an applied migration is never edited: restore the shipped files",
        )
    pending = sorted(set(shipped) - set(recorded))
    if pending:
        return _check(
            "postgres.migrations",
            "fail",
            f"{len(pending)} migration(s) not applied: {', '.join(shipped[v].filename for v in pending)}",
            "run `layby migrate` before the new version's services start (docs/kubernetes.md#upgrades)",
        )
    return _check("postgres.migrations", "ok", f"all {len(shipped)} migrations applied")


# -- the services and the clocks ----------------------------------------------------------------


async def _ping(reach: Reach) -> list[tuple[ServiceSeen, float, float]]:
    """Every service's answer, with the wall clock when the ping left and when the answer came."""
    assert reach.nc is not None
    nc = reach.nc
    inbox = nc.new_inbox()
    answers: list[tuple[ServiceSeen, float, float]] = []
    sent = reach.wall()

    async def heard(msg: Any) -> None:
        with contextlib.suppress(msgspec.ValidationError, msgspec.DecodeError):
            answers.append((msgspec.json.decode(msg.data, type=ServiceSeen), sent, reach.wall()))

    sub = await nc.subscribe(inbox, cb=heard)
    try:
        await nc.publish(reach.settings.names.doctor_ping, b"", reply=inbox)
        await nc.flush()
        await asyncio.sleep(PING_WINDOW_SECONDS)
    finally:
        await sub.unsubscribe()
    return answers


async def _services(reach: Reach) -> DoctorCheck:
    if reach.nc is None:
        return _check("services", "skip", "NATS is not reachable")
    answers = await _ping(reach)
    counts = dict.fromkeys(SERVICES, 0)
    protocols: set[int] = set()
    for seen, sent, received in answers:
        counts[seen.service] = counts.get(seen.service, 0) + 1
        protocols.add(seen.protocol)
        offset = seen.clock - (sent + received) / 2
        reach.clocks.append((f"{seen.service} {seen.instance}", offset, (received - sent) / 2))
    present = ", ".join(f"{name} x{n}" for name, n in counts.items() if n)
    absent = [name for name in SERVICES if not counts[name]]
    if absent:
        return _check(
            "services",
            "fail",
            ("; ".join(f"no {name} service answered: {WHY_NEEDED[name]}" for name in absent))
            + (f" (answered: {present})" if present else ""),
            "start the missing services with the same LAYBY_NATS_URL and LAYBY_NAMESPACE",
        )
    if len(protocols) > 1 or PROTOCOL not in protocols:
        return _check(
            "services",
            "warn",
            f"{present}; they speak command protocols {sorted(protocols)}, this command {PROTOCOL}",
            "finish the rolling upgrade: every service on one version",
        )
    return _check("services", "ok", f"{present} answered")


def _clock_offsets_of_monitor(reach: Reach) -> None:
    for base, varz in reach.monitor.items():
        if isinstance(varz, dict) and isinstance(varz.get("now"), str):
            with contextlib.suppress(ValueError):
                now = datetime.fromisoformat(varz["now"].replace("Z", "+00:00")).timestamp()
                sent, received = varz["_sent"], varz["_received"]
                reach.clocks.append((f"NATS {base}", now - (sent + received) / 2, (received - sent) / 2))


async def _clock_of_postgres(reach: Reach) -> None:
    if reach.pool is None:
        return
    async with reach.pool.acquire() as conn:
        sent = reach.wall()
        now: datetime = await conn.fetchval("SELECT clock_timestamp()")
        received = reach.wall()
    reach.clocks.append(("PostgreSQL", now.timestamp() - (sent + received) / 2, (received - sent) / 2))


def _clocks(reach: Reach) -> DoctorCheck:
    if not reach.clocks:
        return _check(
            "clocks", "skip", "no other clock could be read (NATS monitoring, PostgreSQL, the services)"
        )
    # Only what the round trip cannot explain counts against a clock.
    beyond = [(who, abs(off) - err, off) for who, off, err in reach.clocks]
    worst = max(beyond, key=lambda b: b[1])
    listing = ", ".join(f"{who} {off * 1000:+.0f} ms" for who, off, _ in reach.clocks)
    if worst[1] > CLOCK_FAIL_SECONDS:
        status: CheckStatus = "fail"
    elif worst[1] > CLOCK_WARN_SECONDS:
        status = "warn"
    else:
        return _check("clocks", "ok", f"within {CLOCK_WARN_SECONDS * 1000:.0f} ms of this clock: {listing}")
    return _check(
        "clocks",
        status,
        f"{worst[0]} is {worst[2] * 1000:+.0f} ms off this clock (all: {listing}); deadlines, "
        "escalations and expiries move with the clock that decides them",
        "run NTP (chrony, systemd-timesyncd) on every machine and node",
    )


# -- the public base URL ------------------------------------------------------------------------


async def _public_url(reach: Reach) -> DoctorCheck:
    base = reach.settings.public_base_url
    channels = parse_channels(reach.settings.channels)
    if base is None:
        if channels:
            return _check(
                "public_url",
                "fail",
                f"INTERACTIONS_PUBLIC_BASE_URL is not set, so questions to the channels "
                f"{', '.join(sorted(channels))} are refused: their links need it",
                "set INTERACTIONS_PUBLIC_BASE_URL to the HTTPS address people reach the door at",
            )
        return _check("public_url", "skip", "INTERACTIONS_PUBLIC_BASE_URL is not set (no channel needs it)")
    if reach.nc is None:
        return _check("public_url", "skip", "NATS is not reachable: the proof travels on it")
    host = urlsplit(base).hostname or ""
    try:
        await asyncio.get_running_loop().getaddrinfo(host, None)
    except OSError as exc:
        return _check(
            "public_url",
            "fail",
            f"{host!r} of {base} does not resolve here: {exc.strerror or exc}",
            "point the name's DNS record at the door's load balancer",
        )
    nonce = secrets.token_hex(16)
    served = asyncio.Event()

    async def heard(_msg: Any) -> None:
        served.set()

    sub = await reach.nc.subscribe(reach.settings.names.doctor_probe(nonce), cb=heard)
    try:
        await reach.nc.flush()
        url = f"{base.rstrip('/')}/api/doctor/probe/{nonce}"
        try:
            async with reach.http() as client:
                response = await client.get(url)
        except httpx.HTTPError as exc:
            return _check(
                "public_url",
                "fail",
                f"{base} cannot be reached from here: {type(exc).__name__} {exc}".strip(),
                "check the load balancer or ingress in front of the door, and its certificate",
            )
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(served.wait(), PROBE_WAIT_SECONDS)
    finally:
        await sub.unsubscribe()
    if not served.is_set():
        return _check(
            "public_url",
            "fail",
            f"{base} answered (HTTP {response.status_code}) but no door of this installation served "
            "the probe: it reaches something else",
            "route the public URL (every path under it) to this installation's door",
        )
    if urlsplit(base).scheme == "https":
        return _check("public_url", "ok", f"{base} reaches this installation's door over HTTPS")
    # The setting admits plain HTTP for a loopback host only (check_public_base_url).
    return _check(
        "public_url",
        "warn",
        f"{base} reaches this installation's door over plain HTTP on this machine only",
        "chat providers and people elsewhere need an HTTPS address: put one in front of the door",
    )


# -- channels and secrets -----------------------------------------------------------------------


async def _channels(reach: Reach) -> list[DoctorCheck]:
    settings = reach.settings
    try:
        configured = parse_channels(settings.channels)
    except ValueError as exc:
        return [_check("channels", "fail", f"LAYBY_CHANNELS {exc}", "fix LAYBY_CHANNELS (docs/channels.md)")]
    if not configured:
        return [_check("channels", "skip", "no channel is configured (LAYBY_CHANNELS)")]
    found: list[DoctorCheck] = []
    for name, config in configured.items():
        check = f"channel.{name}"
        try:
            loaded = load_channels(json.dumps({name: config}), parse_secrets(settings.webhook_secrets))
        except ValueError as exc:
            found.append(_check(check, "fail", str(exc), "fix the channel's entry or LAYBY_WEBHOOK_SECRETS"))
            continue
        channel = loaded[name]
        identity: Callable[[], Awaitable[str]] | None = getattr(channel, "identity", None)
        try:
            if identity is None:
                found.append(_check(check, "skip", f"the {config['plugin']!r} plugin has no identity call"))
                continue
            try:
                who = await identity()
            except Exception as exc:  # noqa: BLE001 - any plugin's failure is the finding
                found.append(
                    _check(
                        check,
                        "fail",
                        f"the provider refused or did not answer: {exc}",
                        "check the channel's credentials (the entries of LAYBY_WEBHOOK_SECRETS it names) "
                        "and its API URL",
                    )
                )
                continue
            found.append(_check(check, "ok", who))
        finally:
            close = getattr(channel, "aclose", None)
            if close is not None:
                with contextlib.suppress(Exception):
                    await close()
    return found


def _secrets(reach: Reach) -> list[DoctorCheck]:
    settings = reach.settings
    found = []
    if settings.secrets_key:
        keys = len(settings.secrets_key.split(","))
        found.append(
            _check("secrets.sealing", "ok", f"LAYBY_SECRETS_KEY holds {keys} key(s); the first seals")
        )
    else:
        found.append(
            _check(
                "secrets.sealing",
                "fail",
                "LAYBY_SECRETS_KEY is not set: the door and the resume service refuse to start, "
                "and sensitive answers cannot be kept",
                "make one with `layby secrets-key` and give it to every service "
                "(docs/security.md#sensitive-answers-at-rest)",
            )
        )
    if settings.webhooks_out_secrets:
        names = sorted(parse_webhook_secrets(settings.webhooks_out_secrets))
        found.append(_check("secrets.webhooks", "ok", f"webhooks are signed for {', '.join(names)}"))
    else:
        found.append(
            _check(
                "secrets.webhooks",
                "skip",
                "LAYBY_WEBHOOKS_OUT_SECRETS is not set: no ask may name a notify_url "
                "(docs/webhooks.md#secrets)",
            )
        )
    return found


# -- all of it ----------------------------------------------------------------------------------


async def diagnose(reach: Reach) -> DoctorReport:
    """Every check, in order; the report is ``ok`` unless one failed."""
    if reach.monitor_urls:
        reach.monitor = await _read_monitor(reach, "/varz")
        _clock_offsets_of_monitor(reach)
    checks = [
        _nats_reachable(reach),
        await _nats_authorization(reach),
        _nats_sync(reach),
        await _nats_replicas(reach),
        _postgres_reachable(reach),
        await _postgres_migrations(reach),
        await _services(reach),
    ]
    await _clock_of_postgres(reach)
    checks.append(_clocks(reach))
    checks.append(await _public_url(reach))
    checks += await _channels(reach)
    checks += _secrets(reach)
    return DoctorReport(
        ok=all(c.status != "fail" for c in checks),
        at=datetime.fromtimestamp(reach.wall(), UTC),
        checks=checks,
    )


CONNECT_SECONDS = 5.0


@contextlib.asynccontextmanager
async def reach_from(settings: Settings) -> AsyncIterator[Reach]:
    """What ``layby doctor`` reaches with the settings it runs with (the services' own, in their pod;
    beside ``layby up``, what its runtime file and data directory keep). Connections that fail are
    findings, not errors."""
    from layby.connection import connect_nats
    from layby.natskeys import service_inbox
    from layby.runtime import data_dir, read_runtime
    from layby_server.operations.runtime import resolve_seed, resolve_urls
    from layby_server.store.eventstore import wait_for_jetstream

    nats_url, db_url = resolve_urls(settings)
    runtime = read_runtime(data_dir(settings))
    monitor = settings.nats_monitor_url
    if runtime is not None and settings.nats_url is None:
        from layby_server.operations.up import SECRETS_KEY_FILE

        kept = data_dir(settings) / SECRETS_KEY_FILE
        settings = msgspec.structs.replace(
            settings,
            public_base_url=settings.public_base_url or runtime.public_base_url,
            secrets_key=settings.secrets_key
            or (kept.read_text(encoding="ascii").strip() if kept.exists() else None),
        )
        monitor = monitor or runtime.nats_monitor_url
    reach = Reach(
        settings=settings,
        nats_url=nats_url,
        db_url=db_url,
        monitor_urls=[u for u in (monitor or "").split(",") if u],
    )
    try:
        if nats_url is not None:
            try:
                reach.nc = await connect_nats(
                    nats_url,
                    name="layby-doctor",
                    first_connect_timeout=CONNECT_SECONDS,
                    seed=resolve_seed(settings, "admin"),
                    inbox_prefix=service_inbox("admin"),
                    ca_file=settings.nats_ca_file,
                )
                await wait_for_jetstream(reach.nc, timeout=CONNECT_SECONDS)
            except Exception as exc:  # noqa: BLE001 - the failure is the finding
                reach.nats_error = str(exc) or type(exc).__name__
                if reach.nc is not None:
                    with contextlib.suppress(Exception):
                        await reach.nc.close()
                reach.nc = None
        if db_url is not None:
            try:
                reach.pool = await asyncio.wait_for(
                    asyncpg.create_pool(db_url, min_size=1, max_size=2), CONNECT_SECONDS * 2
                )
            except Exception as exc:  # noqa: BLE001 - the failure is the finding
                reach.db_error = f"{type(exc).__name__}: {exc}"
        yield reach
    finally:
        if reach.pool is not None:
            await reach.pool.close()
        if reach.nc is not None:
            with contextlib.suppress(Exception):
                await reach.nc.close()


MARKS = {"ok": "ok  ", "warn": "WARN", "fail": "FAIL", "skip": "skip"}


def render(report: DoctorReport) -> str:
    """The report for a terminal: one line per check, its fix under it."""
    width = max(len(c.name) for c in report.checks)
    lines = []
    for c in report.checks:
        lines.append(f"{MARKS[c.status]}  {c.name.ljust(width)}  {c.detail}")
        if c.fix:
            lines.append(f"      {' ' * width}  fix: {c.fix}")
    failed = sum(c.status == "fail" for c in report.checks)
    warned = sum(c.status == "warn" for c in report.checks)
    lines.append("")
    lines.append("healthy" if not failed and not warned else f"{failed} failed, {warned} to look at")
    return "\n".join(lines)
