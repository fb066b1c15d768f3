"""The jq sandbox runs door programs in child processes, bounded in time, memory and output
(docs/decisions/0019-caller-asks-and-the-door-contract.md#jq-programs). These start real child
processes but need no NATS or PostgreSQL, so they are unit tests."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import psutil
import pytest
import pytest_asyncio

from layby_contracts.errors import BadInput
from layby_server.write.jqchild import Failed, ProgramCache
from layby_server.write.jqrun import JqRunner

pytestmark = pytest.mark.unit

PARKED = [
    {"id": "ix-1", "status": "asking", "to": "caller", "question": "Deploy?"},
    {"id": "ix-2", "status": "finished", "result": {"ok": True}},
]


@pytest_asyncio.fixture(scope="module")
async def jq() -> AsyncIterator[JqRunner]:
    async with JqRunner() as runner:
        yield runner


@pytest_asyncio.fixture(scope="module")
async def quick() -> AsyncIterator[JqRunner]:
    """A runner with a short time limit, for the programs that never end."""
    async with JqRunner(timeout_seconds=0.3) as runner:
        yield runner


def _sandbox_pids() -> set[int]:
    """The live jq children of this process (an ended child an earlier test's runner has not
    reaped yet has no command line left to read: it is no sandbox)."""
    return {
        child.pid for child in psutil.Process().children() if "layby_server.write.jqchild" in _cmdline(child)
    }


def _cmdline(process: psutil.Process) -> str:
    try:
        return " ".join(process.cmdline())
    except (psutil.ZombieProcess, psutil.NoSuchProcess):
        return ""


async def test_the_documented_example_programs_give_their_documented_values(jq: JqRunner) -> None:
    """cancel every park, answer the first ask, start with the count of parks
    (docs/caller-asks.md#the-door-contract)."""
    results = await jq.run(
        {
            "start": "{payload: .msg, waiting: ($parked | length)}",
            "cancel": "[$parked[].id]",
            "resume": '{id: $parked[0].id, payload: {answer: "yes"}}',
        },
        {"msg": "hello"},
        PARKED,
    )
    assert results == {
        "cancel": [["ix-1", "ix-2"]],
        "resume": [{"id": "ix-1", "payload": {"answer": "yes"}}],
        "start": [{"payload": "hello", "waiting": 2}],
    }
    assert list(results) == ["cancel", "resume", "start"]


async def test_parked_is_bound_and_the_input_is_the_programs_input(jq: JqRunner) -> None:
    """``$parked`` holds the entries as given and ``.`` is the door's input document."""
    results = await jq.run({"extras": "{parked: $parked, input: .}"}, [1, "two"], PARKED)
    assert results == {"extras": [{"parked": PARKED, "input": [1, "two"]}]}


async def test_an_undeclared_variable_is_refused_when_checked(jq: JqRunner) -> None:
    """A program that uses a ``$name`` nobody declared does not compile, so the door is refused
    when saved (docs/caller-asks.md#the-door-contract)."""
    await jq.check("resume", "$parked | map(.id)")
    with pytest.raises(BadInput) as caught:
        await jq.check("resume", "{id: $first, payload: 1}")
    assert caught.value.message == "resume_expr does not compile: $first is not defined at line 1, column 6"
    assert caught.value.field == "resume_expr"


async def test_compile_errors_are_located_in_the_authors_program(jq: JqRunner) -> None:
    """Line and column are the author's own, and an unfinished program says so rather than
    pointing past its end."""
    with pytest.raises(BadInput) as caught:
        await jq.check("start", "{a: 1} |\n  foo")
    assert caught.value.message == "start_expr does not compile: foo/0 is not defined at line 2, column 3"
    with pytest.raises(BadInput) as caught:
        await jq.check("start", ".a +")
    assert caught.value.message == "start_expr does not compile: syntax error, unexpected end of program"
    with pytest.raises(BadInput) as caught:
        await jq.check("start", ". as $x | 1)")
    assert caught.value.message == "start_expr does not compile: an unmatched ')'"


async def test_a_trailing_comment_does_not_break_the_program(jq: JqRunner) -> None:
    """The program is wrapped on lines of its own, so a final ``# comment`` is just a comment."""
    assert await jq.run({"start": "{n: 1} # the kwargs"}, None, []) == {"start": [{"n": 1}]}


@pytest.mark.parametrize("program", ['import "secrets" as s; .', 'include "secrets"; .'])
async def test_module_directives_do_not_compile(jq: JqRunner, program: str) -> None:
    """A program cannot load jq modules from the server's disk."""
    with pytest.raises(
        BadInput, match=r"^start_expr does not compile: syntax error, unexpected (import|include)"
    ):
        await jq.check("start", program)


async def test_the_environment_is_empty(jq: JqRunner) -> None:
    """``$ENV`` and ``env`` show nothing of the server's environment."""
    assert await jq.run({"start": "$ENV", "extras": "env"}, None, []) == {"start": [{}], "extras": [{}]}


async def test_a_program_that_never_ends_times_out_and_the_runner_goes_on(quick: JqRunner) -> None:
    """A loop is stopped at the time limit, naming the program that was running; its child is
    replaced (and reaped) and the next visit runs normally."""
    before = _sandbox_pids()
    started = time.monotonic()
    with pytest.raises(BadInput) as caught:
        await quick.run({"cancel": "[]", "start": "def f: f; f", "extras": "{}"}, None, [])
    assert time.monotonic() - started < 5
    assert (caught.value.message, caught.value.field) == ("start_expr ran longer than 0.3 s", "start_expr")
    for program in ("last(repeat(1))", "[range(1e10)]"):
        with pytest.raises(BadInput, match=r"^extras_expr ran longer than 0\.3 s$"):
            await quick.run({"extras": program}, None, [])
    assert await quick.run({"start": "{ok: true}"}, None, []) == {"start": [{"ok": True}]}
    gone = before - _sandbox_pids()
    assert gone
    assert not any(psutil.pid_exists(pid) for pid in gone)


async def test_a_value_larger_than_the_output_limit_is_refused(jq: JqRunner) -> None:
    """Each value is at most ``max_output_bytes`` as JSON; a larger one is an error, not a
    truncation."""
    assert await jq.run({"start": '{s: ("x" * 65000)} | .s | length'}, None, []) == {"start": [65000]}
    with pytest.raises(BadInput) as caught:
        await jq.run({"start": '{s: ("x" * 70000)}'}, None, [])
    assert caught.value.message == "start_expr yielded a value larger than 65536 bytes"
    assert caught.value.field == "start_expr"


async def test_no_more_than_two_values_are_computed(jq: JqRunner) -> None:
    """Two values tell one from more than one; a third is never computed, so an endless stream
    returns at once."""
    started = time.monotonic()
    assert await jq.run({"cancel": "range(1e12)", "resume": "repeat(1)"}, None, []) == {
        "cancel": [0, 1],
        "resume": [1, 1],
    }
    assert time.monotonic() - started < 0.5
    assert await jq.run({"cancel": '1, 2, error("never reached")'}, None, []) == {"cancel": [1, 2]}
    assert await jq.run({"cancel": "empty"}, None, []) == {"cancel": []}


async def test_a_runtime_error_names_the_program_and_jqs_message(jq: JqRunner) -> None:
    """A failing program stops the visit with jq's message, cut at 200 characters."""
    with pytest.raises(BadInput) as caught:
        await jq.run({"cancel": '"ok"', "resume": 'error("no such ask")', "start": "{}"}, None, [])
    assert (caught.value.message, caught.value.field) == ("resume_expr failed: no such ask", "resume_expr")
    with pytest.raises(BadInput) as caught:
        await jq.run({"start": ".a + 1"}, "text", [])
    assert caught.value.message == 'start_expr failed: Cannot index string with string ("a")'
    with pytest.raises(BadInput) as caught:
        await jq.run({"start": 'error("x" * 500)'}, None, [])
    assert caught.value.message == "start_expr failed: " + "x" * 199 + "…"


async def test_a_program_with_a_nul_character_is_refused(jq: JqRunner) -> None:
    """jq would read a NUL as the end of the program, so it never reaches jq."""
    with pytest.raises(BadInput, match=r"^extras_expr must not contain NUL characters$"):
        await jq.run({"extras": "{}\x00garbage"}, None, [])


async def test_a_memory_blowup_is_contained_and_the_runner_goes_on() -> None:
    """A program that builds a value past the memory limit ends its child, not the server; the
    visit is refused and the next one runs in a fresh child."""
    async with JqRunner(processes=1, memory_bytes=128 * 2**20, timeout_seconds=10) as runner:
        for program in ('"abcdefgh" * 100000000', "def f: [f]; f"):
            with pytest.raises(BadInput) as caught:
                await runner.run({"start": program}, None, [])
            assert caught.value.message == (
                "start_expr stopped the jq sandbox: it ran out of memory (the limit is 128 MiB) or crashed jq"
            )
            assert await runner.run({"start": "{n: 2}"}, None, []) == {"start": [{"n": 2}]}


def test_compiled_programs_are_cached_least_recently_used_first() -> None:
    """A child compiles a program once (compiling costs a hundred runs) and keeps the most recently
    used, compile errors included."""
    cache = ProgramCache(2)
    first = cache.get(". + 1")
    assert cache.get(". + 1") is first
    broken = cache.get("$undeclared")
    assert isinstance(broken, Failed)
    assert cache.get("$undeclared") is broken
    cache.get(". + 1")
    cache.get(". + 2")  # evicts the least recently used: the broken one
    assert cache.get(". + 1") is first
    assert cache.get("$undeclared") is not broken


async def test_the_same_program_runs_again_from_the_cache(jq: JqRunner) -> None:
    """Running one program twice gives the same values (the second time from the child's cache)."""
    program = '[$parked[] | select(.status == "asking") | .id]'
    first = await jq.run({"cancel": program}, None, PARKED)
    assert first == await jq.run({"cancel": program}, None, PARKED) == {"cancel": [["ix-1"]]}


async def test_concurrent_runs_each_get_their_own_values(quick: JqRunner) -> None:
    """Requests queue for a free child; a program timing out in one does not disturb the others."""

    async def one(n: int) -> object:
        return await quick.run({"start": "{n: .}"}, n, [])

    async def looping() -> None:
        with pytest.raises(BadInput, match="ran longer than"):
            await quick.run({"start": "last(repeat(1))"}, None, [])

    results = await asyncio.gather(*(one(n) for n in range(10)), looping(), *(one(n) for n in range(10, 20)))
    assert [r for r in results if r is not None] == [{"start": [{"n": n}]} for n in range(20)]


async def test_a_request_abandoned_mid_run_leaves_the_runner_whole(quick: JqRunner) -> None:
    """A caller that gives up (its task is cancelled) takes its child down with it; a fresh one
    serves the next request."""
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.05):
            await quick.run({"start": "last(repeat(1))"}, None, [])
    results = await asyncio.gather(*(quick.run({"start": "{n: .}"}, n, []) for n in range(4)))
    assert results == [{"start": [{"n": n}]} for n in range(4)]


async def test_closing_the_runner_ends_and_reaps_every_child() -> None:
    """No child outlives the runner, and none is left a zombie."""
    before = _sandbox_pids()
    async with JqRunner(processes=3) as runner:
        ours = _sandbox_pids() - before
        assert len(ours) == 3
        assert await runner.run({"start": "{}"}, None, []) == {"start": [{}]}
    assert not any(psutil.pid_exists(pid) for pid in ours)
    with pytest.raises(RuntimeError, match="not open"):
        await runner.run({"start": "{}"}, None, [])


async def test_no_programs_run_nothing(jq: JqRunner) -> None:
    """A door with no programs needs no child at all."""
    assert await jq.run({}, None, []) == {}
