"""The door-definition doors and commands: save, show, list, delete, and every refusal of a save
(docs/doors/doors.md). Real NATS and PostgreSQL, the services in-process."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import asyncpg
import msgspec
import pytest

from layby_contracts.commands import REPLY_DECODER, DeleteDoor, Listed, ListParked, PutDoor, Refused
from layby_server.store.eventstore import EventStore
from tests.conftest import ALICE, OPERATOR, System
from tests.helpers import eventually
from tests.integration.test_nats_authorization import Secured, secured  # noqa: F401 - a fixture

pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]

HOOK = {"kind": "hook", "target": "agent", "kwargs": {"a": 1}, "resume_expr": "{id: $parked[0].id}"}
NOT_FOUND = {"error": "Door not found"}


async def put(system: System, name: str, spec: Any, token: str = OPERATOR) -> tuple[int, Any]:
    async with system.http(token) as http:
        r = await http.put(f"/api/doors/{name}", json=spec)
        return r.status_code, r.json()


async def get(system: System, path: str, token: str = OPERATOR, **params: Any) -> tuple[int, Any]:
    async with system.http(token) as http:
        r = await http.get(path, params=params)
        return r.status_code, r.json()


async def listed(system: System, names: list[str]) -> dict[str, Any]:
    """The list door's data once the projection lists exactly ``names``."""
    _, body = await eventually(
        lambda: get(system, "/api/doors"),
        f"the list to be {names}",
        until=lambda found: [d["name"] for d in found[1]["data"]["items"]] == names,
    )
    data: dict[str, Any] = body["data"]
    return data


async def test_a_door_is_saved_shown_listed_and_deleted(system: System) -> None:
    """A save returns the door as saved, a show reads it back at once, the list has it, and a
    delete removes it (docs/doors/doors.md#save)."""
    status, saved = await put(system, "deploys", HOOK)
    assert status == 200
    door = saved["data"]
    assert door["name"] == "deploys" and door["spec"] == HOOK and door["updated_by"] == "ops"
    assert await get(system, "/api/doors/deploys") == (200, saved)
    data = await listed(system, ["deploys"])
    assert data["items"] == [door]
    assert (data["total"], data["page"], data["page_size"], data["next_page"]) == (1, 1, 50, None)
    replaced = {"kind": "hook", "target": "other"}
    status, again = await put(system, "deploys", replaced)
    assert (status, again["data"]["spec"]) == (200, replaced)
    assert (await get(system, "/api/doors/deploys"))[1]["data"]["spec"] == replaced
    async with system.http() as http:
        r = await http.delete("/api/doors/deploys")
    assert (r.status_code, r.json()) == (
        200,
        {"data": {"name": "deploys", "status": "deleted", "deleted_by": "ops"}},
    )
    assert await get(system, "/api/doors/deploys") == (404, NOT_FOUND)


async def test_an_unknown_field_is_refused_naming_it(system: System) -> None:
    """A definition with a key DoorSpec does not have is refused, naming the key; a key that is
    no field name is not echoed at all (docs/doors/doors.md#what-a-save-checks)."""
    assert await put(system, "d1", {**HOOK, "resume_exp": "."}) == (
        400,
        {"error": "unknown field 'resume_exp'", "field": "resume_exp"},
    )
    assert await put(system, "d1", {**HOOK, "<b>x</b>": 1}) == (
        400,
        {"error": "the spec has an unknown field"},
    )
    assert await get(system, "/api/doors/d1") == (404, NOT_FOUND)


@pytest.mark.parametrize(
    ("change", "error", "field"),
    [
        ({"target": 3}, "target must be a string", "target"),
        ({"kind": "cron"}, "kind must be one of hook, schedule, conversation", "kind"),
        ({"kwargs": [1]}, "kwargs must be an object", "kwargs"),
        ({"every_seconds": "5"}, "every_seconds must be a number", "every_seconds"),
        ({"kind": None}, "kind must be one of hook, schedule, conversation", "kind"),
    ],
)
async def test_a_value_of_the_wrong_type_is_refused_naming_its_field(
    system: System, change: dict[str, Any], error: str, field: str
) -> None:
    """A value of the wrong type is refused naming the field and the type it takes, never
    repeating the value (docs/doors/doors.md#what-a-save-checks)."""
    assert await put(system, "d2", {**HOOK, **change}) == (400, {"error": error, "field": field})


async def test_a_missing_required_field_is_refused_naming_it(system: System) -> None:
    """``kind`` and ``target`` are required (docs/doors/doors.md#the-definition)."""
    assert await put(system, "d3", {"kind": "hook"}) == (
        400,
        {"error": "target is required", "field": "target"},
    )


async def test_a_body_that_is_not_a_json_object_is_refused(system: System) -> None:
    """The body is the definition: a JSON object, read once, no key repeated
    (docs/doors/doors.md#save)."""
    async with system.http() as http:
        array = await http.put("/api/doors/d4", json=[1])
        broken = await http.put("/api/doors/d4", content=b"{", headers={"Content-Type": "application/json"})
        repeated = await http.put("/api/doors/d4", content=b'{"kind": "hook", "kind": "schedule"}')
        big = await http.put("/api/doors/d4", json={**HOOK, "input": "x" * system.settings.max_body_bytes})
    assert (array.status_code, array.json()) == (400, {"error": "body must be a JSON object"})
    assert (broken.status_code, broken.json()) == (400, {"error": "invalid JSON body"})
    assert (repeated.status_code, repeated.json()) == (400, {"error": "the JSON body repeats a key"})
    assert (big.status_code, big.json()) == (413, {"error": "payload too large"})


@pytest.mark.parametrize("column", ["cancel", "resume", "start", "extras"])
async def test_a_program_that_does_not_compile_is_refused_naming_its_column(
    system: System, column: str
) -> None:
    """Each jq program is compiled at save: one that does not compile is refused, naming its
    column, and nothing is saved (docs/doors/doors.md#what-a-save-checks)."""
    assert await put(system, "d5", {**HOOK, f"{column}_expr": "{id: "}) == (
        400,
        {
            "error": f"{column}_expr does not compile: syntax error, unexpected end of program",
            "field": f"{column}_expr",
        },
    )
    assert await get(system, "/api/doors/d5") == (404, NOT_FOUND)


async def test_an_undeclared_variable_is_refused_at_save(system: System) -> None:
    """Only ``$parked`` is bound: a program naming any other ``$name`` is refused when it is
    saved, not when a visit runs it (docs/doors/doors.md#what-a-save-checks)."""
    assert await put(system, "d6", {**HOOK, "start_expr": "{n: $nope}"}) == (
        400,
        {
            "error": "start_expr does not compile: $nope is not defined at line 1, column 5",
            "field": "start_expr",
        },
    )
    assert (await put(system, "d6", {**HOOK, "start_expr": "{n: ($parked | length)}"}))[0] == 200


@pytest.mark.parametrize(
    ("cron", "error"),
    [
        ("61 * * * *", "cron does not parse: Bad minute"),
        ("0 0 31 2 *", "cron does not parse: Bad day-of-month"),
        ("* * *", "cron does not parse: a cron expression has five fields"),
        ("0 * * * * *", "cron does not parse: a cron expression has five fields"),
    ],
)
async def test_a_cron_that_does_not_parse_is_refused(system: System, cron: str, error: str) -> None:
    """A schedule's cron is five fields that parse, and a date that exists (UTC); anything else
    is refused naming ``cron`` (docs/doors/doors.md#what-a-save-checks)."""
    spec = {"kind": "schedule", "target": "nightly", "cron": cron}
    assert await put(system, "d7", spec) == (400, {"error": error, "field": "cron"})
    status, saved = await put(system, "d7", {**spec, "cron": "*/5 * * * MON-FRI"})
    assert (status, saved["data"]["spec"]["cron"]) == (200, "*/5 * * * MON-FRI")


async def test_a_user_token_reads_doors_but_cannot_save_or_delete_them(
    system: System, store: EventStore
) -> None:
    """Doors are platform configuration: a ``user`` identity reads them; saving and deleting
    are an operator's, at the door (403) and at the ask service alike (docs/doors/doors.md#who-may-call)."""
    forbidden = {"error": "only an operator may save or delete doors"}
    assert (await put(system, "shared", HOOK))[0] == 200
    assert await put(system, "shared", {"kind": "hook", "target": "x"}, token=ALICE) == (403, forbidden)
    async with system.http(ALICE) as http:
        r = await http.delete("/api/doors/shared")
    assert (r.status_code, r.json()) == (403, forbidden)
    status, shown = await get(system, "/api/doors/shared", token=ALICE)
    assert (status, shown["data"]["spec"]) == (200, HOOK)
    await listed(system, ["shared"])
    assert [d["name"] for d in (await get(system, "/api/doors", token=ALICE))[1]["data"]["items"]] == [
        "shared"
    ]
    for cmd in (
        PutDoor(token=ALICE, name="shared", spec={"kind": "hook", "target": "x"}),
        DeleteDoor(token=ALICE, name="shared"),
    ):
        msg = await store.nc.request(store.names.cmd_door, msgspec.json.encode(cmd), timeout=10)
        reply = REPLY_DECODER.decode(msg.data)
        assert isinstance(reply, Refused)
        assert (reply.kind, reply.message) == ("audience", "only an operator may save or delete doors")


async def test_an_unknown_door_is_the_same_404_as_a_name_no_door_can_have(system: System) -> None:
    """Show and delete answer one 404 for an unknown door and for a name no door can have
    (docs/doors/doors.md#show)."""
    async with system.http() as http:
        for path in (
            "/api/doors/nope",
            "/api/doors/Not.A.Name",
            "/api/doors/a%2Fb",
            "/api/doors/" + "x" * 65,
        ):
            shown, deleted = await http.get(path), await http.delete(path)
            assert (shown.status_code, shown.json()) == (404, NOT_FOUND), path
            assert (deleted.status_code, deleted.json()) == (404, NOT_FOUND), path
    assert await put(system, "Not.A.Name", HOOK) == (
        400,
        {"error": "name must be 1-64 of a-z 0-9 _ -", "field": "name"},
    )


async def test_a_deleted_door_is_a_404_and_leaves_the_list(system: System) -> None:
    """Once deleted, a door is the unknown door's 404 (shown or deleted again) and the list
    leaves it out; saving the name again makes a new door (docs/doors/doors.md#delete)."""
    for name in ("gone", "kept"):
        assert (await put(system, name, HOOK))[0] == 200
    async with system.http() as http:
        assert (await http.delete("/api/doors/gone")).status_code == 200
        again = await http.delete("/api/doors/gone")
    assert (again.status_code, again.json()) == (404, NOT_FOUND)
    assert await get(system, "/api/doors/gone") == (404, NOT_FOUND)
    assert (await listed(system, ["kept"]))["total"] == 1
    assert (await put(system, "gone", HOOK))[0] == 200
    await listed(system, ["gone", "kept"])


async def test_the_list_is_paged_by_name(system: System) -> None:
    """``page`` and ``pageSize`` page the list in name order, with the list door's paging rules
    (docs/doors/doors.md#list)."""
    names = [f"door-{i}" for i in range(5)]
    for name in reversed(names):
        assert (await put(system, name, HOOK))[0] == 200
    await listed(system, names)
    status, body = await get(system, "/api/doors", page=2, pageSize=2)
    assert status == 200
    data = body["data"]
    assert [d["name"] for d in data["items"]] == ["door-2", "door-3"]
    assert (data["total"], data["page"], data["page_size"], data["next_page"]) == (5, 2, 2, 3)
    last = (await get(system, "/api/doors", page=3, pageSize=2))[1]["data"]
    assert ([d["name"] for d in last["items"]], last["next_page"]) == (["door-4"], None)
    assert await get(system, "/api/doors", page=0) == (400, {"error": "page must be >= 1", "field": "page"})


async def test_a_rebuild_from_the_log_keeps_the_doors(
    system: System, db: asyncpg.Pool, store: EventStore
) -> None:
    """Dropping the projections and replaying the log rebuilds the ``doors`` table exactly,
    deleted doors included (docs/engineering.md#the-event-log-is-the-source-of-truth)."""
    from layby_server.projection.projector import rebuild

    for name in ("a", "b", "c"):
        assert (await put(system, name, {**HOOK, "target": f"flow-{name}"}))[0] == 200
    assert (await put(system, "b", {"kind": "schedule", "target": "nightly", "every_seconds": 60}))[0] == 200
    async with system.http() as http:
        assert (await http.delete("/api/doors/c")).status_code == 200
    await listed(system, ["a", "b"])  # also true before "c" is projected at all: wait for its deletion
    snapshot = "SELECT * FROM doors ORDER BY name"

    async def rows() -> list[dict[str, Any]]:
        return [dict(r) for r in await db.fetch(snapshot)]

    before = await eventually(
        rows,
        "every save and the delete projected",
        until=lambda found: (
            len(found) == 3 and found[2]["deleted"] and json.loads(found[1]["spec"])["kind"] == "schedule"
        ),
    )
    assert [(r["name"], r["deleted"]) for r in before] == [("a", False), ("b", False), ("c", True)]
    await rebuild(db, store)
    after = [dict(r) for r in await db.fetch(snapshot)]
    assert after == before
    assert json.loads(after[1]["spec"]) == {"kind": "schedule", "target": "nightly", "every_seconds": 60.0}


async def test_doors_are_saved_and_deleted_under_nats_authorization(secured: Secured) -> None:  # noqa: F811
    """With every connection on its own key, the door forwards a save and a delete to the ask
    service and reads the door back, and NATS refuses nothing (docs/security.md)."""
    system = secured.system
    status, saved = await put(system, "guarded", HOOK)
    assert (status, saved["data"]["spec"]) == (200, HOOK)
    assert await get(system, "/api/doors/guarded") == (200, saved)
    await listed(system, ["guarded"])
    async with system.http() as http:
        assert (await http.delete("/api/doors/guarded")).status_code == 200


async def test_the_ask_service_lists_a_subject_for_an_operator_over_door_commands(
    store: EventStore, system: System
) -> None:
    """``cmd.parked.v1`` lists a subject's entries (none yet) for an operator, and refuses a
    malformed subject naming the field (docs/caller-asks.md#parks-on-the-subject)."""
    msg = await store.nc.request(
        store.names.cmd_door, msgspec.json.encode(ListParked(token=OPERATOR, subject="s")), timeout=10
    )
    reply = REPLY_DECODER.decode(msg.data)
    assert isinstance(reply, Listed)
    assert (reply.subject, reply.entries) == ("s", [])
    msg = await store.nc.request(
        store.names.cmd_door, msgspec.json.encode(ListParked(token=OPERATOR, subject="no spaces")), timeout=10
    )
    refused = REPLY_DECODER.decode(msg.data)
    assert isinstance(refused, Refused)
    assert (refused.kind, refused.field) == ("invalid", "subject")


async def test_the_cli_puts_lists_shows_and_deletes_a_door(
    system: System,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``layby doors put|list|show|delete`` drive the doors: a file, ``--spec`` or standard
    input; a table for the list, JSON for show; a refusal on standard error (docs/cli.md#doors)."""
    import io

    from layby import cli

    monkeypatch.setenv("LAYBY_URL", system.url)
    monkeypatch.setenv("LAYBY_TOKEN", OPERATOR)
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(HOOK))

    async def run(*argv: str) -> tuple[int, str, str]:
        """The exit status, standard output, and the CLI's own error line (the services in this
        process log to standard error too)."""
        code = await asyncio.to_thread(cli.main, list(argv))
        out, err = capsys.readouterr()
        return code, out, "".join(line + "\n" for line in err.splitlines() if line.startswith("error"))

    assert await run("doors", "put", "deploys", "--file", str(spec)) == (
        0,
        "saved deploys (hook -> agent)\n",
        "",
    )
    code, out, _ = await run(
        "doors", "put", "nightly", "--spec", '{"kind": "schedule", "target": "n", "cron": "0 3 * * *"}'
    )
    assert (code, out) == (0, "saved nightly (schedule -> n)\n")
    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps({"kind": "hook", "target": "piped"})))
    assert (await run("doors", "put", "piped", "--file", "-"))[:2] == (0, "saved piped (hook -> piped)\n")
    code, out, _ = await run("doors", "show", "deploys")
    assert code == 0
    assert json.loads(out)["spec"] == HOOK
    await listed(system, ["deploys", "nightly", "piped"])
    code, out, _ = await run("doors", "list")
    lines = out.splitlines()
    assert code == 0
    assert lines[0].split() == ["NAME", "KIND", "TARGET", "SUBJECT", "UPDATED", "BY", "UPDATED"]
    assert [line.split()[:3] for line in lines[1:4]] == [
        ["deploys", "hook", "agent"],
        ["nightly", "schedule", "n"],
        ["piped", "hook", "piped"],
    ]
    assert lines[-1] == "3 of 3 doors (page 1)"
    assert await run("doors", "delete", "piped") == (0, "deleted piped\n", "")
    assert await run("doors", "show", "piped") == (1, "", "error (404): Door not found\n")
    code, _, err = await run("doors", "put", "bad", "--spec", '{"kind": "hook", "target": "a", "foo": 1}')
    assert (code, err) == (1, "error (400): unknown field 'foo'\n")
    assert (await run("doors", "put", "bad", "--spec", "{"))[0] == 2
