"""The bus contract as documents (docs/bus.md): JSON Schema for every message that travels on NATS,
and an AsyncAPI 3 document naming each subject, what travels on it, who publishes and who
subscribes, and what each NATS identity may do. Generated from the contracts package and the
NATS permissions, checked in under ``contracts/schema/``, and checked in CI to match the code
(``layby contract --check``).

A change to a command or a reply is a new command protocol (``PROTOCOL``): ``protocols.json``
keeps the SHA-256 of the commands' schema under each protocol number, and writing a changed schema
under a protocol number that already has another is refused. Events have their own number
(``EVENT_SCHEMA``) and file (``event_schemas.json``) the same way.
"""

from __future__ import annotations

import hashlib
import json
import typing
from pathlib import Path
from typing import Any

import msgspec

from layby.natskeys import key_id
from layby_contracts import commands, events
from layby_contracts.commands import PROTOCOL, Continuation, Wake
from layby_contracts.doctor import ServiceSeen
from layby_contracts.subjects import Names
from layby_server.operations.natsauth import SERVICE_ROLES, TokenEntry, service_permissions, token_permissions

__all__ = ["OPENAPI_FILE", "SCHEMA_DIR", "BusContractError", "check", "documents", "write"]

SCHEMA_DIR = Path(__file__).resolve().parents[3] / "contracts" / "schema"
"""Where the documents are checked in (the repository's ``contracts/schema``)."""
COMMANDS_FILE = "commands.schema.json"
EVENTS_FILE = "events.schema.json"
ASYNCAPI_FILE = "asyncapi.json"
PROTOCOLS_FILE = "protocols.json"
OPENAPI_FILE = "openapi.json"
"""The doors' OpenAPI 3.1 document (docs/doors/common.md#the-openapi-document), beside the bus's."""
EVENT_SCHEMAS_FILE = "event_schemas.json"
REF = "#/$defs/{name}"
EXAMPLE = Names("layby")
"""Subjects are documented for the default namespace; ``layby`` is ``LAYBY_NAMESPACE``."""


class BusContractError(Exception):
    """The documents cannot be written (a schema changed under the same number) or are stale."""


def _members(union: Any) -> list[type]:
    return list(typing.get_args(union))


COMMAND_TYPES: list[type] = [
    *_members(commands.Command),
    *_members(commands.DoorCommand),
    commands.Notify,
    *_members(commands.Reply),
    Continuation,
    Wake,
    ServiceSeen,
]
EVENT_TYPES: list[type] = _members(events.Event)


def _schema(types: list[type], title: str) -> dict[str, Any]:
    (refs, defs) = msgspec.json.schema_components(types, ref_template=REF)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": title,
        "oneOf": list(refs),
        "$defs": defs,
    }


def _sha(doc: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()


def _tag(cls: type) -> str:
    return str(cls.__struct_config__.tag)  # type: ignore[attr-defined]


def _message(cls: type, schema_file: str) -> dict[str, Any]:
    return {
        "name": _tag(cls),
        "title": cls.__name__,
        "contentType": "application/json",
        "payload": {"$ref": f"{schema_file}#/$defs/{cls.__name__}"},
        **({"summary": doc.strip().splitlines()[0]} if (doc := cls.__doc__) else {}),
    }


def _permissions(names: Names) -> dict[str, Any]:
    """What each NATS identity may publish and subscribe to (docs/security.md#nats-authorization);
    a token's own subjects are shown with ``<kid>``, its key id."""
    roles: dict[str, Any] = {f"service:{role}": service_permissions(role, names) for role in SERVICE_ROLES}
    for role in ("user", "operator"):
        entry = TokenEntry(token="<token>", identity="<identity>", role=role)  # noqa: S106 - a placeholder
        shown = json.dumps(token_permissions(entry, names)).replace(key_id(entry.token), "<kid>")
        roles[f"token:{role}"] = json.loads(shown)
    return roles


def _asyncapi(names: Names) -> dict[str, Any]:
    run_cmds = [
        commands.StartRun,
        commands.ParkRun,
        commands.EndRun,
        commands.AttachWorker,
        commands.CheckCurrent,
        commands.RecordStep,
        commands.CancelRun,
        commands.RetryRun,
        commands.WorkerSeen,
        commands.MoveRun,
    ]
    replies = _members(commands.Reply)
    channels: dict[str, Any] = {
        "cmdAsk": {
            "address": names.cmd_ask,
            "description": "Asks, ticket reservations and a waiter's look at its question; request-reply.",
            "messages": {
                _tag(c): _message(c, COMMANDS_FILE)
                for c in (commands.Ask, commands.ReserveTicket, commands.Look)
            },
        },
        "cmdPrune": {
            "address": names.cmd_prune,
            "description": "Withdrawing asks a caller gave up on; request-reply.",
            "messages": {_tag(commands.Prune): _message(commands.Prune, COMMANDS_FILE)},
        },
        "cmdRun": {
            "address": names.cmd_run,
            "description": "Run commands: start, park, end, steps, cancel, retry, move, workers; "
            "request-reply.",
            "messages": {_tag(c): _message(c, COMMANDS_FILE) for c in run_cmds},
        },
        "cmdDoor": {
            "address": names.cmd_door,
            "description": "Door definitions, visits and parked entries; request-reply.",
            "messages": {_tag(c): _message(c, COMMANDS_FILE) for c in _members(commands.DoorCommand)},
        },
        "cmdNotify": {
            "address": names.cmd_notify,
            "description": "One-way notifications; request-reply.",
            "messages": {_tag(commands.Notify): _message(commands.Notify, COMMANDS_FILE)},
        },
        "replies": {
            "address": "{inbox}",
            "description": "The reply to a command, on the requester's own inbox.",
            "parameters": {"inbox": {"description": "The request's reply subject."}},
            "messages": {f"reply.{_tag(c)}": _message(c, COMMANDS_FILE) for c in replies},
        },
        "events": {
            "address": f"{names.namespace}.ev.{{aggregate}}",
            "description": "The event log (stream "
            f"{names.events_stream}): each aggregate's events on its own subject, appended "
            "with the expected last sequence (docs/architecture.md).",
            "parameters": {"aggregate": {"description": "ix.<interaction_id>, run.<run_id>, ..."}},
            "messages": {_tag(c): _message(c, EVENTS_FILE) for c in EVENT_TYPES},
        },
        "continuations": {
            "address": f"{names.namespace}.cont.{{flow}}.{{run_id}}.{{generation}}",
            "description": f"Resumes for the workers (stream {names.continuations_stream}); a flow "
            "version other than 1 is <flow>~<version> (docs/versions.md).",
            "parameters": {
                "flow": {"description": "The flow, with ~<version> when not version 1."},
                "run_id": {"description": "The run."},
                "generation": {"description": "Which execution."},
            },
            "messages": {_tag(Continuation): _message(Continuation, COMMANDS_FILE)},
        },
        "doctorPing": {
            "address": names.doctor_ping,
            "description": "`layby doctor`'s ping; every service process answers with ServiceSeen.",
            "messages": {_tag(ServiceSeen): _message(ServiceSeen, COMMANDS_FILE)},
        },
    }
    operations: dict[str, Any] = {}
    for key in ("cmdAsk", "cmdPrune", "cmdRun", "cmdDoor", "cmdNotify"):
        operations[f"{key}Send"] = {
            "action": "send",
            "channel": {"$ref": f"#/channels/{key}"},
            "reply": {"channel": {"$ref": "#/channels/replies"}},
            "x-publishers": ["token:user", "token:operator", "service:door"],
        }
        operations[f"{key}Receive"] = {
            "action": "receive",
            "channel": {"$ref": f"#/channels/{key}"},
            "x-subscribers": ["service:ask (queue group layby-ask)"],
        }
    operations["eventsAppend"] = {
        "action": "send",
        "channel": {"$ref": "#/channels/events"},
        "x-publishers": [
            "service:ask",
            "service:door",
            "service:delivery",
            "service:resume",
            "service:sweeper",
        ],
    }
    operations["continuationsReceive"] = {
        "action": "receive",
        "channel": {"$ref": "#/channels/continuations"},
        "x-subscribers": ["token:operator (a worker: a durable pull consumer per flow and version)"],
    }
    return {
        "asyncapi": "3.0.0",
        "info": {
            "title": "Layby's NATS bus",
            "version": f"protocol {PROTOCOL}, event schema {events.EVENT_SCHEMA}",
            "description": "Generated by `layby contract` from the contracts package; see docs/bus.md. "
            "Subjects are shown for LAYBY_NAMESPACE=layby.",
        },
        "defaultContentType": "application/json",
        "channels": channels,
        "operations": operations,
        "x-permissions": _permissions(names),
    }


def documents(directory: Path = SCHEMA_DIR, extra: dict[str, Any] | None = None) -> dict[str, str]:
    """Every document's text, by file name; the protocol files extended with this build's numbers
    (``BusContractError`` when a schema changed under a number already recorded). ``extra``: more
    documents to write beside them, by file name (the doors' OpenAPI document, which the caller
    generates: this layer cannot import the door)."""
    cmd_schema = _schema(COMMAND_TYPES, f"Layby bus commands and replies (protocol {PROTOCOL})")
    ev_schema = _schema(EVENT_TYPES, f"Layby events (event schema {events.EVENT_SCHEMA})")
    recorded = {
        PROTOCOLS_FILE: (PROTOCOL, _sha(cmd_schema), "PROTOCOL (contracts/layby_contracts/commands.py)"),
        EVENT_SCHEMAS_FILE: (
            events.EVENT_SCHEMA,
            _sha(ev_schema),
            "EVENT_SCHEMA (contracts/layby_contracts/events.py)",
        ),
    }
    out = {
        COMMANDS_FILE: cmd_schema,
        EVENTS_FILE: ev_schema,
        ASYNCAPI_FILE: _asyncapi(EXAMPLE),
        **(extra or {}),
    }
    for name, (number, sha, where) in recorded.items():
        path = directory / name
        known: dict[str, str] = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
        if known.get(str(number), sha) != sha:
            raise BusContractError(
                f"the schema changed under {where} = {number}, which {name} records with another "
                f"schema: bump the number (and describe it) before regenerating"
            )
        out[name] = {**known, str(number): sha}
    return {name: json.dumps(doc, indent=2, sort_keys=True) + "\n" for name, doc in out.items()}


def write(directory: Path = SCHEMA_DIR, extra: dict[str, Any] | None = None) -> list[str]:
    """Write the documents; the names of the files that changed."""
    directory.mkdir(parents=True, exist_ok=True)
    changed = []
    for name, text in documents(directory, extra).items():
        path = directory / name
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
            changed.append(name)
    return changed


def check(directory: Path = SCHEMA_DIR, extra: dict[str, Any] | None = None) -> list[str]:
    """The files that differ from what the code generates (empty: up to date)."""
    return [
        name
        for name, text in documents(directory, extra).items()
        if not (directory / name).exists() or (directory / name).read_text(encoding="utf-8") != text
    ]
