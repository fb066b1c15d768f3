"""The bus contract's documents (docs/bus.md): checked in, generated from the code, every golden
sample valid against its schema, and a schema change without a new protocol number refused."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from layby_contracts.commands import PROTOCOL
from layby_contracts.events import EVENT_SCHEMA
from layby_server.operations.busdoc import (
    ASYNCAPI_FILE,
    COMMAND_TYPES,
    COMMANDS_FILE,
    EVENT_TYPES,
    EVENTS_FILE,
    OPENAPI_FILE,
    PROTOCOLS_FILE,
    SCHEMA_DIR,
    BusContractError,
    check,
    documents,
)
from layby_services.door.openapi import document

pytestmark = pytest.mark.unit
GOLDEN = Path(__file__).parent / "golden"


def _tag(cls: type) -> str:
    """A message's type tag; an untagged one (``Wake``) is named by its class."""
    tag = cls.__struct_config__.tag  # type: ignore[attr-defined]
    return str(tag) if tag is not None else cls.__name__.lower()


def test_the_checked_in_documents_are_what_the_code_generates() -> None:
    """A Struct or a door changed without `layby contract` fails here (and in CI)."""
    assert check(extra={OPENAPI_FILE: document()}) == [], "run `layby contract` and commit contracts/schema"


def test_every_golden_sample_validates_against_its_schema() -> None:
    validated = set()
    for file, types in ((COMMANDS_FILE, COMMAND_TYPES), (EVENTS_FILE, EVENT_TYPES)):
        schema = json.loads((SCHEMA_DIR / file).read_text(encoding="utf-8"))
        for cls in types:
            tag = _tag(cls)
            sample = next(
                (p for p in (GOLDEN / f"{tag}.json", GOLDEN / f"reply.{tag}.json") if p.exists()), None
            )
            if sample is None:
                continue
            one = {"$ref": f"#/$defs/{cls.__name__}", "$defs": schema["$defs"]}
            errors = list(Draft202012Validator(one).iter_errors(json.loads(sample.read_bytes())))
            assert not errors, f"{sample.name}: {errors[0].message} at {list(errors[0].absolute_path)}"
            validated.add(cls)
    missing = {c.__name__ for c in (*COMMAND_TYPES, *EVENT_TYPES)} - {c.__name__ for c in validated}
    # Every command, reply and event has a golden sample (test_golden_events.py): all were checked.
    assert missing <= {"ServiceSeen"}, missing


def test_a_schema_change_under_the_same_protocol_number_is_refused(tmp_path: Path) -> None:
    shutil.copytree(SCHEMA_DIR, tmp_path, dirs_exist_ok=True)
    recorded = json.loads((tmp_path / PROTOCOLS_FILE).read_text(encoding="utf-8"))
    recorded[str(PROTOCOL)] = "0" * 64  # as if the commands had been different under this number
    (tmp_path / PROTOCOLS_FILE).write_text(json.dumps(recorded), encoding="utf-8")
    with pytest.raises(BusContractError) as refused:
        documents(tmp_path)
    assert f"PROTOCOL (contracts/layby_contracts/commands.py) = {PROTOCOL}" in str(refused.value)
    assert "bump the number" in str(refused.value)


def test_each_number_keeps_the_schema_it_was_released_with() -> None:
    protocols = json.loads((SCHEMA_DIR / PROTOCOLS_FILE).read_text(encoding="utf-8"))
    assert str(PROTOCOL) in protocols
    assert str(EVENT_SCHEMA) in json.loads((SCHEMA_DIR / "event_schemas.json").read_text(encoding="utf-8"))


def test_the_asyncapi_document_names_every_command_subject_and_every_identity() -> None:
    doc = json.loads((SCHEMA_DIR / ASYNCAPI_FILE).read_text(encoding="utf-8"))
    assert doc["asyncapi"].startswith("3.")
    addresses = {c["address"] for c in doc["channels"].values()}
    assert {
        "layby.cmd.ask",
        "layby.cmd.run",
        "layby.cmd.door",
        "layby.cmd.notify",
        "layby.cmd.prune",
    } <= addresses
    messages = {name for c in doc["channels"].values() for name in c["messages"]}
    assert {_tag(c) for c in EVENT_TYPES} <= messages
    assert "cmd.run.move.v1" in messages
    assert set(doc["x-permissions"]) >= {"service:ask", "service:door", "token:user", "token:operator"}
    assert doc["x-permissions"]["token:user"]["subscribe"]["allow"][0] == "_INBOX.<kid>.>"
