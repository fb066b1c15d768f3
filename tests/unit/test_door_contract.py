"""The door contract's pure rules, given/when/then: what a door may hold, what each program must
yield, and what one visit does (docs/caller-asks.md#the-door-contract)."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from layby_contracts.doors import Column, DoorSpec, Entry, EntryStatus
from layby_contracts.errors import BadInput
from layby_domain.doors import Resume, Take, VisitPlan, check_spec, plan_visit, shape
from layby_domain.validation import is_subject

pytestmark = pytest.mark.unit

HOOK = DoorSpec(kind="hook", target="triage")
SCHEDULE = DoorSpec(kind="schedule", target="triage", every_seconds=60)
CONVERSATION = DoorSpec(kind="conversation", target="triage")


def given_spec(base: DoorSpec = HOOK, **fields: Any) -> DoorSpec:
    return msgspec.structs.replace(base, **fields)


def given_parked(**statuses: EntryStatus) -> list[Entry]:
    return [Entry(id=entry_id, status=status) for entry_id, status in statuses.items()]


def refused(call: Any, message: str, field: str) -> None:
    with pytest.raises(BadInput) as caught:
        call()
    assert (caught.value.message, caught.value.field) == (message, field)


# --- a door definition -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "spec", [HOOK, SCHEDULE, CONVERSATION, given_spec(SCHEDULE, every_seconds=None, cron="0 * * * *")]
)
def test_a_valid_door_of_each_kind_is_accepted(spec: DoorSpec) -> None:
    """A hook, a schedule (every_seconds or cron) and a conversation route pass as saved
    (docs/caller-asks.md#the-door-contract)."""
    check_spec("nightly-triage_2", spec)


@pytest.mark.parametrize("name", ["", "Upper", "a" * 65, "with space", "dotted.name", "door:x"])
def test_a_door_name_is_1_to_64_of_lowercase_digits_underscore_and_dash(name: str) -> None:
    """A door's name is a path part and a subject token (docs/caller-asks.md#the-door-contract)."""
    refused(lambda: check_spec(name, HOOK), "name must be 1-64 of a-z 0-9 _ -", "name")


def test_the_target_is_a_flow_name() -> None:
    """A door starts a registered flow, so its target is a flow name (docs/caller-asks.md#the-door-contract)."""
    refused(
        lambda: check_spec("d", given_spec(target="no.dots")),
        "target must be a flow name: 1-64 of A-Z a-z 0-9 _ -",
        "target",
    )


@pytest.mark.parametrize("subject", ["", "a" * 129, "has.dot", "has space", "star*", "gt>"])
def test_a_subject_is_1_to_128_of_letters_digits_and_underscore_colon_at_dash(subject: str) -> None:
    """A hook's or a schedule's subject is one subject token (docs/caller-asks.md#the-door-contract)."""
    assert not is_subject(subject)
    refused(
        lambda: check_spec("d", given_spec(subject=subject)),
        "subject must be 1-128 of A-Z a-z 0-9 _ : @ -",
        "subject",
    )


@pytest.mark.parametrize("subject", ["door:nightly", "slack:T01:C02", "alice@example-org", "a" * 128])
def test_subjects_with_colons_and_at_signs_are_accepted(subject: str) -> None:
    """``door:<name>`` and chat-style subjects fit the subject rule (docs/caller-asks.md#the-door-contract)."""
    assert is_subject(subject)
    check_spec("d", given_spec(subject=subject))


def test_a_conversation_takes_no_subject() -> None:
    """A conversation route drives the conversation's own subject (docs/caller-asks.md#the-door-contract)."""
    refused(
        lambda: check_spec("d", given_spec(CONVERSATION, subject="door:x")),
        "subject is not for conversations: a conversation drives its own subject",
        "subject",
    )


@pytest.mark.parametrize("column", ["cancel", "resume", "start", "extras"])
def test_a_program_is_at_most_4096_characters(column: Column) -> None:
    """Each of the four programs is capped at 4096 characters (docs/caller-asks.md#the-door-contract)."""
    check_spec("d", given_spec(**{f"{column}_expr": "." * 4096}))
    refused(
        lambda: check_spec("d", given_spec(**{f"{column}_expr": "." * 4097})),
        f"{column}_expr is 4097 characters; the limit is 4096",
        f"{column}_expr",
    )


@pytest.mark.parametrize("column", ["cancel", "resume", "start", "extras"])
def test_a_program_present_is_not_blank(column: Column) -> None:
    """A blank program is refused rather than read as absent (docs/caller-asks.md#the-door-contract)."""
    refused(
        lambda: check_spec("d", given_spec(**{f"{column}_expr": " \n\t"})),
        f"{column}_expr must not be blank (leave it out instead)",
        f"{column}_expr",
    )


def test_a_program_holds_no_nul_character() -> None:
    """A NUL would cut the program short in jq (docs/caller-asks.md#the-door-contract)."""
    refused(
        lambda: check_spec("d", given_spec(start_expr=".\x00")),
        "start_expr must not contain NUL characters",
        "start_expr",
    )


@pytest.mark.parametrize(
    ("field", "value", "kinds", "allowed_on"),
    [
        ("every_seconds", 60.0, "schedules", SCHEDULE),
        ("cron", "* * * * *", "schedules", SCHEDULE),
        ("input", {"a": 1}, "schedules", SCHEDULE),
        ("verifier", {"kind": "github"}, "hooks", HOOK),
        ("channel", "slack", "conversations", CONVERSATION),
        ("subjects", "slack:*", "conversations", CONVERSATION),
    ],
)
def test_kind_specific_fields_are_only_on_their_kind(
    field: str, value: object, kinds: str, allowed_on: DoorSpec
) -> None:
    """Schedule, hook and conversation fields are refused on another kind of door, naming the
    field (docs/caller-asks.md#the-door-contract)."""
    for other in (HOOK, SCHEDULE, CONVERSATION):
        if other.kind == allowed_on.kind:
            continue
        refused(
            lambda other=other: check_spec("d", given_spec(other, **{field: value})),
            f"{field} is only for {kinds}",
            field,
        )


def test_a_schedule_needs_every_seconds_or_cron() -> None:
    """A schedule without a period would never fire (docs/caller-asks.md#the-door-contract)."""
    refused(
        lambda: check_spec("d", given_spec(SCHEDULE, every_seconds=None)),
        "a schedule needs every_seconds or cron",
        "every_seconds",
    )


def test_a_schedule_has_every_seconds_or_cron_not_both() -> None:
    """Exactly one of every_seconds and cron says when a schedule fires (docs/caller-asks.md#the-door-contract)."""
    refused(
        lambda: check_spec("d", given_spec(SCHEDULE, cron="* * * * *")),
        "every_seconds and cron are mutually exclusive: give one",
        "cron",
    )


@pytest.mark.parametrize("seconds", [0.5, 0, -1, 31 * 24 * 3600 + 1, float("inf"), float("nan")])
def test_every_seconds_is_between_one_second_and_31_days(seconds: float) -> None:
    """A schedule fires at most every second and at least every 31 days (docs/caller-asks.md#the-door-contract)."""
    check_spec("d", given_spec(SCHEDULE, every_seconds=1))
    check_spec("d", given_spec(SCHEDULE, every_seconds=31 * 24 * 3600))
    refused(
        lambda: check_spec("d", given_spec(SCHEDULE, every_seconds=seconds)),
        "every_seconds must be between 1 and 2678400 (31 days)",
        "every_seconds",
    )


@pytest.mark.parametrize("cron", ["", "   ", "*" * 121])
def test_cron_is_non_blank_and_at_most_120_characters(cron: str) -> None:
    """Only the cron expression's length is judged here; the server checks its syntax
    (docs/caller-asks.md#the-door-contract)."""
    refused(
        lambda: check_spec("d", given_spec(SCHEDULE, every_seconds=None, cron=cron)),
        "cron must be a non-blank cron expression of at most 120 characters",
        "cron",
    )


def test_kwargs_are_a_json_object_of_at_most_65536_bytes() -> None:
    """The default kwargs a start runs on are capped like a request body (docs/caller-asks.md#the-door-contract)."""
    check_spec("d", given_spec(kwargs={"k": "x" * 65528}))
    refused(
        lambda: check_spec("d", given_spec(kwargs={"k": "x" * 65529})),
        "kwargs is 65537 bytes as JSON; the limit is 65536",
        "kwargs",
    )


# --- what each program yields ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("column", "value", "normal"),
    [
        ("cancel", None, []),
        ("cancel", "ix-1", ["ix-1"]),
        ("cancel", ["ix-1", "ix-2"], ["ix-1", "ix-2"]),
        ("cancel", [], []),
        ("resume", None, []),
        ("resume", {"id": "ix-1", "payload": {"answer": "yes"}}, [Resume("ix-1", {"answer": "yes"})]),
        ("resume", {"id": "ix-1", "payload": None}, [Resume("ix-1", None)]),
        ("resume", "ix-2", [Take("ix-2")]),
        ("resume", [{"id": "ix-1", "payload": 1}, "ix-2"], [Resume("ix-1", 1), Take("ix-2")]),
        ("resume", [], []),
        ("start", {"payload": "hi", "waiting": 2}, {"payload": "hi", "waiting": 2}),
        ("start", {}, {}),
        ("start", None, None),
        ("extras", {"source": ["hook", 1, None]}, {"source": ["hook", 1, None]}),
        ("extras", None, None),
    ],
)
def test_every_allowed_shape_of_every_column_is_normalized(
    column: Column, value: object, normal: object
) -> None:
    """Each row of the contract's table: cancel ids, resumes and takes, start and extras objects
    (docs/caller-asks.md#the-door-contract)."""
    assert shape(column, [value]) == normal


@pytest.mark.parametrize(
    ("column", "value", "what"),
    [
        ("cancel", 7, "a number"),
        ("cancel", True, "a boolean"),
        ("cancel", {"id": "ix-1"}, "an object"),
        ("cancel", ["ix-1", 2], "a list holding a number"),
        ("cancel", [["ix-1"]], "a list holding a list"),
        ("resume", 7.5, "a number"),
        ("resume", False, "a boolean"),
        ("resume", {"id": "ix-1"}, "an object without exactly the keys id and payload"),
        (
            "resume",
            {"id": "ix-1", "payload": 1, "more": 2},
            "an object without exactly the keys id and payload",
        ),
        ("resume", {"id": 3, "payload": 1}, "{id, payload} whose id is a number"),
        ("resume", ["ix-1", None], "a list holding null"),
        ("resume", [["ix-1"]], "a list holding a list"),
        ("resume", [{"payload": 1}], "a list holding an object without exactly the keys id and payload"),
        ("start", "go", "a string"),
        ("start", [], "a list"),
        ("start", 0, "a number"),
        ("extras", True, "a boolean"),
        ("extras", ["a"], "a list"),
    ],
)
def test_a_value_outside_its_columns_shape_is_refused_naming_its_type(
    column: Column, value: object, what: str
) -> None:
    """A wrong shape is a loud error naming the column, the shapes it takes and the JSON type that
    came (docs/caller-asks.md#the-door-contract)."""
    expected = {
        "cancel": "null, an id, or a list of ids",
        "resume": "null, an id, {id, payload}, or a list of these",
        "start": "an object or null",
        "extras": "an object or null",
    }[column]
    refused(
        lambda: shape(column, [value]),
        f"{column}_expr must yield {expected}; it yielded {what}",
        f"{column}_expr",
    )


def test_a_refused_value_is_never_echoed_back() -> None:
    """An error names a value's type, never the value (docs/caller-asks.md#the-door-contract)."""
    with pytest.raises(BadInput) as caught:
        shape("start", ["sk-secret-token"])
    assert "sk-secret-token" not in caught.value.message
    with pytest.raises(BadInput) as caught:
        shape("resume", [{"id": "ix-1", "secret-key": "sk-secret-token"}])
    assert "secret" not in caught.value.message


@pytest.mark.parametrize("column", ["cancel", "resume", "start", "extras"])
def test_a_program_that_yields_more_than_one_value_is_refused(column: Column) -> None:
    """Each program yields exactly one value; a second is an error, never a choice
    (docs/caller-asks.md#the-door-contract)."""
    refused(
        lambda: shape(column, [None, None]),
        f"{column}_expr yielded more than one value; it must yield exactly one",
        f"{column}_expr",
    )


@pytest.mark.parametrize("column", ["cancel", "resume", "start", "extras"])
def test_a_program_that_yields_no_value_is_refused(column: Column) -> None:
    """No value is an error, not a silent null (docs/caller-asks.md#the-door-contract)."""
    refused(
        lambda: shape(column, []),
        f"{column}_expr yielded no value; it must yield exactly one",
        f"{column}_expr",
    )


# --- one visit ---------------------------------------------------------------------------------


def test_without_a_start_expr_a_visit_starts_the_doors_kwargs() -> None:
    """No start_expr starts the door's own kwargs, ``{}`` by default (docs/caller-asks.md#the-door-contract)."""
    assert plan_visit({}, parked=[], spec=HOOK) == VisitPlan(
        cancels=[], resumes=[], takes=[], start={}, extras=None
    )
    plan = plan_visit({}, parked=[], spec=given_spec(kwargs={"mode": "nightly"}))
    assert plan.start == {"mode": "nightly"}


def test_a_start_expr_yielding_null_starts_nothing() -> None:
    """``null`` from start_expr means no start at all (docs/caller-asks.md#the-door-contract)."""
    spec = given_spec(kwargs={"mode": "nightly"}, start_expr="null")
    assert plan_visit({"start": [None]}, parked=[], spec=spec) == VisitPlan(
        cancels=[], resumes=[], takes=[], start=None, extras=None
    )


def test_a_start_expr_object_is_the_started_kwargs() -> None:
    """An object from start_expr replaces the door's kwargs (docs/caller-asks.md#the-door-contract)."""
    spec = given_spec(kwargs={"mode": "nightly"}, start_expr="{payload: .msg}")
    assert plan_visit({"start": [{"payload": "hi"}]}, parked=[], spec=spec).start == {"payload": "hi"}


def test_extras_ride_only_a_start() -> None:
    """extras go with a start; with no start, a resume or a take, or a null extras_expr, there are
    none (docs/caller-asks.md#the-door-contract)."""
    parked = given_parked(ask="asking")
    extras = {"extras": [{"source": "hook"}]}
    assert plan_visit(extras, parked=parked, spec=HOOK).extras == {"source": "hook"}
    assert plan_visit({**extras, "start": [None]}, parked=parked, spec=HOOK).extras is None
    resumed = plan_visit({**extras, "resume": [{"id": "ask", "payload": 1}]}, parked=parked, spec=HOOK)
    assert (resumed.start, resumed.extras) == (None, None)
    assert plan_visit({"extras": [None]}, parked=parked, spec=HOOK).extras is None


def test_a_non_null_resume_is_the_one_action_and_nothing_starts() -> None:
    """When resume_expr names something, that is the visit's one action (docs/caller-asks.md#the-door-contract)."""
    parked = given_parked(ask="asking", done="finished")
    plan = plan_visit(
        {"resume": [[{"id": "ask", "payload": {"answer": "yes"}}, "done"]], "start": [{"go": 1}]},
        parked=parked,
        spec=HOOK,
    )
    assert plan == VisitPlan(
        cancels=[],
        resumes=[Resume("ask", {"answer": "yes"})],
        takes=[Take("done")],
        start=None,
        extras=None,
    )


def test_an_empty_resume_list_is_no_action_so_the_visit_starts() -> None:
    """A resume_expr that selects nothing (``[]``) leaves the action to the start
    (docs/caller-asks.md#the-door-contract)."""
    plan = plan_visit({"resume": [[]], "start": [{"go": 1}]}, parked=[], spec=HOOK)
    assert (plan.resumes, plan.takes, plan.start) == ([], [], {"go": 1})


def test_cancels_come_first_and_the_resume_still_happens() -> None:
    """Cancels run first, in the order yielded, and the one action follows them
    (docs/caller-asks.md#the-door-contract)."""
    parked = given_parked(old2="asking", old1="running", ask="asking")
    plan = plan_visit(
        {"cancel": [["old1", "old2"]], "resume": [{"id": "ask", "payload": "yes"}]}, parked=parked, spec=HOOK
    )
    assert plan == VisitPlan(
        cancels=["old1", "old2"], resumes=[Resume("ask", "yes")], takes=[], start=None, extras=None
    )


@pytest.mark.parametrize("status", ["asking", "running", "finished", "failed"])
def test_a_cancel_may_name_an_entry_of_any_status(status: EntryStatus) -> None:
    """Any parked entry can be cancelled (docs/caller-asks.md#the-door-contract)."""
    plan = plan_visit({"cancel": ["e"], "start": [None]}, parked=given_parked(e=status), spec=HOOK)
    assert plan.cancels == ["e"]


@pytest.mark.parametrize("column", ["cancel", "resume"])
def test_an_id_that_is_not_parked_on_the_subject_is_refused(column: Column) -> None:
    """A program may only name entries parked on the door's subject (docs/caller-asks.md#the-door-contract)."""
    refused(
        lambda: plan_visit({column: ["ghost"]}, parked=given_parked(real="finished"), spec=HOOK),
        f"{column}_expr named ghost, which is not parked on this subject",
        f"{column}_expr",
    )


@pytest.mark.parametrize("status", ["running", "finished", "failed"])
def test_only_an_asking_entry_can_be_resumed(status: EntryStatus) -> None:
    """``{id, payload}`` answers an ask, so the entry must be asking (docs/caller-asks.md#the-door-contract)."""
    refused(
        lambda: plan_visit({"resume": [{"id": "e", "payload": 1}]}, parked=given_parked(e=status), spec=HOOK),
        f"entry e is {status}; only an asking entry can be resumed",
        "resume_expr",
    )


@pytest.mark.parametrize(
    ("status", "taken"), [("asking", False), ("running", False), ("finished", True), ("failed", True)]
)
def test_only_a_finished_or_failed_waiting_outcome_can_be_taken(status: EntryStatus, taken: bool) -> None:
    """A bare id takes a waiting outcome, so the entry must be finished or failed
    (docs/caller-asks.md#the-door-contract)."""
    parked = given_parked(e=status)
    if taken:
        assert plan_visit({"resume": ["e"]}, parked=parked, spec=HOOK).takes == [Take("e")]
        return
    refused(
        lambda: plan_visit({"resume": ["e"]}, parked=parked, spec=HOOK),
        f"entry e is {status}; only a finished or failed waiting outcome can be taken",
        "resume_expr",
    )


@pytest.mark.parametrize(
    ("resume", "verb", "status"), [({"id": "e", "payload": 1}, "resume", "asking"), ("e", "take", "finished")]
)
def test_one_visit_cannot_cancel_and_resume_or_take_the_same_entry(
    resume: object, verb: str, status: EntryStatus
) -> None:
    """An entry named by both cancel_expr and resume_expr is refused (docs/caller-asks.md#the-door-contract)."""
    refused(
        lambda: plan_visit({"cancel": ["e"], "resume": [resume]}, parked=given_parked(e=status), spec=HOOK),
        f"entry e is named by both cancel_expr and resume_expr; a visit cannot cancel and {verb} the same entry",
        "resume_expr",
    )


@pytest.mark.parametrize(
    ("column", "value"), [("cancel", ["e", "e"]), ("resume", ["e", {"id": "e", "payload": 1}])]
)
def test_an_id_named_twice_in_one_list_is_refused(column: Column, value: object) -> None:
    """Each entry is acted on once per visit (docs/caller-asks.md#the-door-contract)."""
    refused(
        lambda: plan_visit({column: [value]}, parked=given_parked(e="asking"), spec=HOOK),
        f"{column}_expr named e more than once",
        f"{column}_expr",
    )


def test_an_id_named_in_an_error_is_cut_at_64_characters() -> None:
    """A program can make an id of any length; the error shows at most 64 characters
    (docs/caller-asks.md#the-door-contract)."""
    long_id = "x" * 500
    refused(
        lambda: plan_visit({"cancel": [long_id]}, parked=[], spec=HOOK),
        f"cancel_expr named {'x' * 63}…, which is not parked on this subject",
        "cancel_expr",
    )


def test_every_program_is_checked_even_when_its_value_is_unused() -> None:
    """A broken start_expr is refused on a visit that resumes, so it shows on the first visit
    (docs/caller-asks.md#the-door-contract)."""
    refused(
        lambda: plan_visit(
            {"resume": [{"id": "e", "payload": 1}], "start": ["go"]},
            parked=given_parked(e="asking"),
            spec=HOOK,
        ),
        "start_expr must yield an object or null; it yielded a string",
        "start_expr",
    )
