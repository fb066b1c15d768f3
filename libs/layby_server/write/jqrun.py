"""The jq sandbox: door programs run in a small pool of child processes, bounded in time, memory
and output (docs/decisions/0019-caller-asks-and-the-door-contract.md#jq-programs).

A door author's jq program may loop forever, build a value as large as memory, or print a
megabyte; none of that may reach the server. Each program therefore runs in a persistent child
process (``layby_server.write.jqchild``) started with an empty environment and a capped address space.
Requests queue for a free child; a request that runs longer than ``timeout_seconds`` kills its
child, a fresh one takes its place, and the caller gets a ``BadInput`` naming the program that was
running. A child that dies (out of memory, a crash in jq) is replaced the same way.

Programs are judged here only as jq: whether they compile, fail, or yield a value too large. What
the values mean (the door contract's shapes) is ``layby_domain.doors``'s pure decision.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import re
import signal
import sys
import types
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

import msgspec

from layby_contracts.doors import COLUMNS, Column
from layby_contracts.errors import BadInput
from layby_server.write.jqchild import (
    MAX_FRAME_BYTES,
    WRAPPER,
    Check,
    Compiled,
    Failed,
    Ready,
    Reply,
    Request,
    Run,
    Values,
)

START_TIMEOUT_SECONDS = 30.0
"""How long a fresh child may take to start (import jq, limit itself) before the server gives up:
a generous bound on an operator problem, never on an author's program."""

CACHE_SIZE = 512
"""Compiled programs each child keeps (a few kilobytes each)."""

MESSAGE_MAX_CHARS = 200
"""jq's own message is cut here: it is the author's aid, not a place to echo input."""

_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])
_LOCATION_RE = re.compile(r" at <top-level>, line (\d+)(?:, column (\d+))?:?$")
_UNEXPECTED_RE = re.compile(r"unexpected (?:'\)'|INVALID_CHARACTER|end of file)")


class _Child:
    """One child process; ``ready`` once its start-up frame has been read."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.ready = False

    async def send(self, request: Request) -> None:
        assert self.process.stdin is not None
        body = msgspec.msgpack.encode(request)
        self.process.stdin.write(len(body).to_bytes(4, "big") + body)
        await self.process.stdin.drain()

    async def receive(self, expected: type[Reply] | types.UnionType) -> Reply:
        """The next reply, which must be of the ``expected`` kind; anything else is a broken
        child (``ConnectionError``), treated like one that died."""
        assert self.process.stdout is not None
        size = int.from_bytes(await self.process.stdout.readexactly(4), "big")
        if size > MAX_FRAME_BYTES:
            raise ConnectionError("the jq child sent an oversized frame")
        reply = _REPLY.decode(await self.process.stdout.readexactly(size))
        if not isinstance(reply, expected):
            raise ConnectionError("the jq child broke the protocol")
        return reply

    async def stop(self) -> None:
        """Kill the process and wait until asyncio has reaped it (no zombie is left behind).

        The signal is sent directly: ``Process.kill()`` polls first, which reaps a child that has
        already died before asyncio's watcher can, and the watcher then reports an unknown child.
        """
        if self.process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.process.pid, signal.SIGKILL)
        await self.process.wait()


_REPLY = msgspec.msgpack.Decoder(Reply)


class JqRunner:
    """A pool of jq child processes: ``async with JqRunner() as jq: await jq.run(...)``."""

    def __init__(
        self,
        *,
        processes: int = 2,
        timeout_seconds: float = 1.0,
        max_output_bytes: int = 65536,
        memory_bytes: int = 512 * 2**20,
    ) -> None:
        if processes < 1:
            raise ValueError("processes must be at least 1")
        if not timeout_seconds > 0:
            raise ValueError("timeout_seconds must be positive")
        self._processes = processes
        self._timeout = timeout_seconds
        self._max_output_bytes = max_output_bytes
        self._memory_bytes = memory_bytes
        self._idle: asyncio.Queue[_Child | None] = asyncio.Queue()
        self._children: set[_Child] = set()
        self._open = False

    async def __aenter__(self) -> JqRunner:
        self._open = True
        try:
            children = [await self._spawn() for _ in range(self._processes)]
            await asyncio.gather(*(self._await_ready(child) for child in children))
            for child in children:
                self._idle.put_nowait(child)
        except BaseException:
            self._open = False
            await self._stop_all()
            raise
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._open = False
        await self._stop_all()

    async def check(self, column: Column, program: str) -> None:
        """Compile ``program`` as the ``column``'s program would run; ``BadInput`` if it does not
        compile (a syntax error, an undeclared ``$name``, a module directive)."""
        _check_text(column, program)
        reply = (await self._exchange(Check(program=program), [column], Compiled))[0]
        if isinstance(reply, Failed):
            raise _failure(column, program, reply, self._max_output_bytes)

    async def run(
        self, programs: Mapping[Column, str], input: Any, parked: list[dict[str, Any]]
    ) -> dict[Column, list[Any]]:
        """Run each given program over ``input`` with ``$parked`` bound, in ``COLUMNS`` order;
        the values each yielded (at most two: enough to tell one from more than one).

        The programs of one visit go to one child in one request (a round trip to a child costs
        more than running a small program), so the time limit bounds the visit's programs
        together; the error names the program that was running when it ran out. The first
        program that fails ends the request.
        """
        columns = [column for column in COLUMNS if column in programs]
        if not columns:
            return {}
        for column in columns:
            _check_text(column, programs[column])
        document = msgspec.json.encode({"parked": parked, "input": input}).decode()
        request = Run(programs=[programs[column] for column in columns], document=document)
        replies = await self._exchange(request, columns, Values)
        results: dict[Column, list[Any]] = {}
        for column, reply in zip(columns, replies, strict=True):
            if isinstance(reply, Failed):
                raise _failure(column, programs[column], reply, self._max_output_bytes)
            assert isinstance(reply, Values)
            results[column] = [msgspec.json.decode(value) for value in reply.values]
        return results

    async def _exchange(
        self, request: Request, columns: list[Column], expected: type[Compiled | Values]
    ) -> list[Reply]:
        """Send one request to a free child and collect one reply per column (fewer when one
        fails). The time limit starts when the request is sent, not while it waits for a child."""
        child = await self._acquire()
        healthy = False
        replies: list[Reply] = []
        try:
            if child is None:
                child = await self._spawn()
            if not child.ready:
                await self._await_ready(child)
            try:
                async with asyncio.timeout(self._timeout):
                    await child.send(request)
                    while len(replies) < len(columns):
                        reply = await child.receive(expected | Failed)
                        replies.append(reply)
                        if isinstance(reply, Failed):
                            break
            except TimeoutError:
                column = columns[len(replies)]
                raise BadInput(
                    f"{column}_expr ran longer than {float(self._timeout)} s", field=f"{column}_expr"
                ) from None
            except (asyncio.IncompleteReadError, ConnectionError, msgspec.DecodeError):
                if self._closed():
                    raise RuntimeError("the jq runner closed") from None
                column = columns[len(replies)]
                raise BadInput(
                    f"{column}_expr stopped the jq sandbox: it ran out of memory "
                    f"(the limit is {self._memory_bytes // 2**20} MiB) or crashed jq",
                    field=f"{column}_expr",
                ) from None
            # A MemoryError in the child leaves its heap in doubt: start afresh.
            healthy = not (replies and isinstance(replies[-1], Failed) and replies[-1].stage == "memory")
            return replies
        finally:
            await self._release(child, healthy)

    async def _acquire(self) -> _Child | None:
        """A free child (``None``: a slot whose child must be started first)."""
        if not self._open:
            raise RuntimeError("the jq runner is not open")
        child = await self._idle.get()
        if self._closed():
            self._idle.put_nowait(child)  # wake the next waiter, which fails the same way
            raise RuntimeError("the jq runner is not open")
        return child

    def _closed(self) -> bool:
        """Whether the runner was closed (a method, so a check after an await is not narrowed away)."""
        return not self._open

    async def _release(self, child: _Child | None, healthy: bool) -> None:
        """Put the slot back; a child that timed out, died or was interrupted mid-request is
        killed and replaced first (the slot goes back empty if that is interrupted too)."""
        slot = child if healthy else None
        try:
            if child is not None and not healthy:
                slot = await self._replace(child)
        finally:
            self._idle.put_nowait(slot)

    async def _replace(self, child: _Child) -> _Child | None:
        """Kill ``child`` and start a fresh one (``None`` if that fails: the next request retries)."""
        self._children.discard(child)
        try:
            await child.stop()
            if not self._open:
                return None
            return await self._spawn()
        except Exception:  # noqa: BLE001 - the next request spawns again and reports what it meets
            return None

    async def _spawn(self) -> _Child:
        # Run from the folder that holds this package so the child imports this very code, with an
        # empty environment; the child empties what Python itself adds.
        cpu_seconds = math.ceil(self._timeout) + 2
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "layby_server.write.jqchild",
            str(self._memory_bytes),
            str(cpu_seconds),
            str(self._max_output_bytes),
            str(CACHE_SIZE),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
            env={},
            cwd=_PACKAGE_ROOT,
            start_new_session=True,
        )
        child = _Child(process)
        if self._closed():  # closed while this one was starting: it must not outlive the runner
            await child.stop()
            raise RuntimeError("the jq runner is not open")
        self._children.add(child)
        return child

    async def _await_ready(self, child: _Child) -> None:
        try:
            async with asyncio.timeout(START_TIMEOUT_SECONDS):
                await child.receive(Ready)
        except (TimeoutError, asyncio.IncompleteReadError, ConnectionError, msgspec.DecodeError) as exc:
            status: int | None = None
            with contextlib.suppress(TimeoutError):
                status = await asyncio.wait_for(child.process.wait(), 1.0)
            raise RuntimeError(
                f"the jq sandbox process did not start (exit status {status}); "
                "`python -m layby_server.write.jqchild 0 3 65536 512` shows why"
            ) from exc
        child.ready = True

    async def _stop_all(self) -> None:
        children, self._children = self._children, set()
        await asyncio.gather(*(child.stop() for child in children))
        while not self._idle.empty():
            self._idle.get_nowait()
        self._idle.put_nowait(None)  # wakes a request still waiting for a child: it fails, closed


def _check_text(column: Column, program: object) -> None:
    if not isinstance(program, str):
        raise BadInput(f"{column}_expr must be a string", field=f"{column}_expr")
    if "\x00" in program:
        raise BadInput(f"{column}_expr must not contain NUL characters", field=f"{column}_expr")


def _failure(column: Column, program: str, failed: Failed, max_output_bytes: int) -> BadInput:
    field = f"{column}_expr"
    match failed.stage:
        case "compile":
            message = compile_message(failed.message, program)
            return BadInput(f"{field} does not compile: {message}", field=field)
        case "large":
            return BadInput(f"{field} yielded a value larger than {max_output_bytes} bytes", field=field)
        case "memory":
            return BadInput(f"{field} ran out of memory", field=field)
        case "runtime":
            return BadInput(f"{field} failed: {_cut(failed.message)}", field=field)


def compile_message(error: str, program: str) -> str:
    """jq's first error line, located in the author's program rather than in the wrapper."""
    first = error.splitlines()[0] if error else "it is not a valid program"
    first = first.removeprefix("jq: error: ")
    found = _LOCATION_RE.search(first)
    if found is None:
        return _cut(first.rstrip(":"))
    head = first[: found.start()]
    line = int(found.group(1))
    if line > program.count("\n") + 1:
        # The wrapper's closing parenthesis: the program ended with something still open.
        if "expecting end of file" in head:
            return "an unmatched ')'"
        return _cut(_UNEXPECTED_RE.sub("unexpected end of program", head, count=1))
    where = f"line {line}"
    if found.group(2) is not None:
        column = int(found.group(2)) - (len(WRAPPER) if line == 1 else 0)
        where += f", column {max(column, 1)}"
    return _cut(f"{head} at {where}")


def _cut(text: str) -> str:
    return text if len(text) <= MESSAGE_MAX_CHARS else text[: MESSAGE_MAX_CHARS - 1] + "…"


class LazyJq:
    """A ``JqRunner`` started on first use: a service whose doors never run a program never
    starts a child process."""

    def __init__(self, **options: Any) -> None:
        self._options = options
        self._runner: JqRunner | None = None
        self._lock = asyncio.Lock()

    async def _get(self) -> JqRunner:
        async with self._lock:
            if self._runner is None:
                runner = JqRunner(**self._options)
                await runner.__aenter__()
                self._runner = runner
            return self._runner

    async def check(self, column: Column, program: str) -> None:
        await (await self._get()).check(column, program)

    async def run(
        self, programs: Mapping[Column, str], input: Any, parked: list[dict[str, Any]]
    ) -> dict[Column, list[Any]]:
        return await (await self._get()).run(programs, input, parked)

    async def aclose(self) -> None:
        async with self._lock:
            if self._runner is not None:
                await self._runner.__aexit__(None, None, None)
                self._runner = None

    async def __aenter__(self) -> LazyJq:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
