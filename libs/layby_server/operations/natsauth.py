"""NATS authorization: who may publish and subscribe to what (docs/security.md#nats-authorization,
docs/decisions/0013-nats-authorization-with-nkey-users.md).

NATS holds one nkey user per service role and one per Layby API token, each with an allow-list of
subjects. This module derives that list from the settings and renders it as a NATS configuration
``authorization`` block, so ``layby up``, compose and Kubernetes all run the same rules:

- every service publishes only the subjects of its own work and uses the JetStream API only on
  Layby's streams (never deleting or purging one); the ask service alone serves commands;
- a token may publish only commands and read only its own request inbox and its own wakes, both
  named by its key id; an operator token may also pull continuations (workers run flows for every
  identity), a ``user`` token may not (a continuation carries its run's answers);
- anything else, including a connection without a key, is refused by NATS itself.
"""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import nkeys

from layby.natskeys import client_seed, key_id, public_key, service_inbox
from layby.settings import SettingsError
from layby_contracts.subjects import Names
from layby_server.store.streams import read_by, stream_names

SERVICE_ROLES = ("ask", "door", "delivery", "resume", "sweeper", "admin")
"""``admin`` is for operators' server commands (``layby projections rebuild``, ``layby backup``,
``layby restore``): the one key that may snapshot, restore and delete Layby's streams."""


@dataclass(frozen=True)
class TokenEntry:
    token: str
    identity: str
    role: str


def token_entries(raw: str) -> list[TokenEntry]:
    """The entries of ``LAYBY_API_TOKENS`` (already validated by ``auth.parse_tokens``)."""
    entries = []
    for entry in raw.split(","):
        if entry.strip():
            token, identity, role = (p.strip() for p in entry.strip().split(":"))
            entries.append(TokenEntry(token, identity, role))
    return entries


def new_seed() -> str:
    """A fresh random NATS user seed (``SU…``)."""
    return bytes(nkeys.encode_seed(secrets.token_bytes(32), nkeys.PREFIX_BYTE_USER)).decode("ascii")


def _stream_api(manage: Iterable[str], read: Iterable[str]) -> list[str]:
    """JetStream API subjects: stream info, create and update on ``manage`` (every service
    provisions every stream at start); message reads and consumers on ``read`` only."""
    subjects = ["$JS.API.INFO", "$JS.API.STREAM.NAMES", "$JS.API.STREAM.LIST"]
    subjects += [f"$JS.API.STREAM.{verb}.{s}" for s in manage for verb in ("INFO", "CREATE", "UPDATE")]
    for s in read:
        subjects += [
            f"$JS.API.STREAM.MSG.GET.{s}",
            f"$JS.API.DIRECT.GET.{s}",
            f"$JS.API.DIRECT.GET.{s}.>",
            f"$JS.API.CONSUMER.*.{s}",
            f"$JS.API.CONSUMER.*.{s}.>",
            f"$JS.API.CONSUMER.*.*.{s}.>",
            f"$JS.ACK.{s}.>",
            f"$JS.FC.{s}.>",
        ]
    return subjects


def _backup_api(n: Names) -> list[str]:
    """Snapshots and restores of every Layby stream, their chunk subjects (flow-control answers
    going out, uploads going in), deleting a stream a restore replaces, and dropping a restored
    continuation whose resume the restored log lacks (layby_server.operations.backup)."""
    subjects = [f"$JS.API.STREAM.MSG.DELETE.{n.continuations_stream}"]
    for s in stream_names(n):
        subjects += [
            f"$JS.API.STREAM.SNAPSHOT.{s}",
            f"$JS.API.STREAM.RESTORE.{s}",
            f"$JS.API.STREAM.DELETE.{s}",
            f"$JS.SNAPSHOT.ACK.{s}.>",
            f"$JS.SNAPSHOT.RESTORE.{s}.>",
        ]
    return subjects


def _reads(role: str, n: Names) -> list[str]:
    """The streams a role reads (the table in ``layby_server.store.streams`` says which and why)."""
    return read_by(role, n)


def service_permissions(role: str, n: Names) -> dict[str, object]:
    """What one service role may publish and subscribe to."""
    ns = n.namespace
    own = {
        "ask": [f"{ns}.ev.>", f"{ns}.media.*", f"{ns}.ticket.*", f"{ns}.step.>", f"{ns}.feed.>"],
        "door": [
            f"{ns}.ev.>",
            f"{ns}.secret.>",
            f"{ns}.ticket.*",
            f"{ns}.step.>",
            f"{ns}.chat.seen.*",
            f"{ns}.msg.*",
            n.cmd_door,
            n.cmd_notify,
            n.cmd_ask,  # the HTTP ask doors (docs/doors/asks.md)
            n.cmd_prune,
            n.cmd_run,
            n.doctor_ping,  # GET /api/doctor pings the services
            n.doctor_probe_all,  # a served probe says so (docs/operations.md#layby-doctor)
        ],
        "delivery": [
            f"{ns}.ev.>",
            f"{ns}.ticket.*",
            f"{ns}.chat.ref.*",
            f"{ns}.chat.latest.*",
            f"{ns}.chat.sent.>",
            f"{ns}.chat.retracted.>",
            f"{ns}.chat.said.*",
            f"{ns}.webhook.*",
        ],
        "resume": [f"{ns}.ev.>", f"{ns}.cont.>", f"{ns}.wake.>", f"{ns}.step.>"],
        "sweeper": [f"{ns}.ev.>", n.cmd_door],
        "admin": [*_backup_api(n), n.doctor_ping],
    }[role] + [n.event_schema]
    subscribe = [f"{service_inbox(role)}.>"]
    if role == "admin":
        subscribe.append(n.doctor_probe_all)  # `layby doctor` hears a door serve its probe
    else:
        subscribe.append(n.doctor_ping)  # every service answers `layby doctor`'s ping
    if role == "ask":
        subscribe.append(f"{ns}.cmd.>")
    if role == "door":
        # A visit's caller waits for its outcome on the visit's own subject (docs/caller-asks.md).
        subscribe.append(f"{ns}.ev.visit.*")
        # The outcome long poll hears that a question resolved (docs/doors/asks.md#the-outcome).
        subscribe.append(f"{ns}.wake.>")
        subscribe.append(n.doctor_probe_all)  # GET /api/doctor hears its own probe
    return {
        "publish": {
            "allow": own + _stream_api(stream_names(n), _reads(role, n)),
        },
        "subscribe": {"allow": subscribe},
        # The ask service answers commands; every service answers the doctor's ping.
        "allow_responses": role != "admin",
    }


def token_permissions(entry: TokenEntry, n: Names) -> dict[str, object]:
    """What a Layby token's connections may do: send commands, read their own replies and wakes;
    an operator token also pulls continuations (docs/security.md#workers)."""
    ns, kid = n.namespace, key_id(entry.token)
    publish = [n.cmd_ask, n.cmd_prune, n.cmd_run, n.cmd_door, n.cmd_notify]
    if entry.role == "operator":
        stream = n.continuations_stream
        publish += [f"$JS.API.CONSUMER.MSG.NEXT.{stream}.*", f"$JS.ACK.{stream}.>"]
    return {
        "publish": {"allow": publish},
        "subscribe": {"allow": [f"_INBOX.{kid}.>", f"{ns}.wake.{kid}.>"]},
    }


def render_authorization(n: Names, service_keys: dict[str, str], tokens: list[TokenEntry]) -> str:
    """The ``authorization`` block of a NATS configuration (JSON values are valid NATS syntax)."""
    users: list[dict[str, object]] = []
    for role in SERVICE_ROLES:
        if role in service_keys:
            users.append({"nkey": service_keys[role], "permissions": service_permissions(role, n)})
    for entry in tokens:
        users.append(
            {"nkey": public_key(client_seed(entry.token)), "permissions": token_permissions(entry, n)}
        )
    lines = [
        "# Generated by Layby (docs/security.md#nats-authorization): one nkey user per service",
        "# role and per API token; regenerate and reload NATS to rotate a key.",
        "authorization {",
        "  users = [",
    ]
    lines += [f"    {json.dumps(u, separators=(', ', ': '))}" for u in users]
    lines += ["  ]", "}", ""]
    return "\n".join(lines)


def ensure_service_seeds(directory: Path) -> dict[str, str]:
    """Each role's seed from ``<directory>/<role>.seed``, created (0600) when missing."""
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    seeds: dict[str, str] = {}
    for role in SERVICE_ROLES:
        path = directory / f"{role}.seed"
        if not path.exists():
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w", encoding="ascii") as handle:
                handle.write(new_seed() + "\n")
        seeds[role] = path.read_text(encoding="ascii").strip()
        if not seeds[role].startswith("SU"):
            raise SettingsError(f"{path} does not hold a NATS user seed")
    return seeds


def authorization_for(n: Names, seeds_dir: Path, api_tokens: str) -> tuple[str, dict[str, str]]:
    """The authorization block for the tokens, and each role's seed (created when missing)."""
    seeds = ensure_service_seeds(seeds_dir)
    keys = {role: public_key(seed) for role, seed in seeds.items()}
    return render_authorization(n, keys, token_entries(api_tokens)), seeds
