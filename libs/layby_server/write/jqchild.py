"""The jq sandbox's child process: compiles and runs door programs for ``layby_server.write.jqrun``.

A door's jq programs are written by door authors, and jq (the ``jq`` C extension) cannot be
interrupted inside a thread: ``def f: f; f`` or ``[range(1e10)]`` would hold the server forever.
So programs run here, in a small persistent process the server can kill. This module is that
process's whole program; it imports only the standard library, msgspec and jq, so it starts fast
and never sees the server's settings, connections or secrets.

What it does at start-up, before reading the first request:

- empties its own environment, so ``$ENV`` and ``env`` show ``{}`` (the server starts it with an
  empty one already; Python may still add a locale variable of its own);
- caps its address space (``RLIMIT_AS``), so a program that builds a huge value fails here, not in
  the server; and forbids core files, so a crash writes nothing to disk;
- moves the protocol off file descriptor 1 and points 1 at ``/dev/null``, so nothing the jq library
  might print can corrupt a frame.

Before each request it also moves its CPU limit (``RLIMIT_CPU``) to a few seconds past what it has
used so far: the server kills a request that runs too long, and this limit is the backstop that
ends a looping child even if the server is gone.

The protocol is length-prefixed msgpack frames (a 4-byte big-endian length, then one Struct of the
``Request`` or ``Reply`` union). A ``Run`` gets one reply per program, in order, as each finishes,
so the server always knows which program is running; a ``Failed`` reply ends the request early.
"""

from __future__ import annotations

import itertools
import math
import os
import resource
import sys
from collections import OrderedDict
from typing import Literal

import jq
import msgspec

WRAPPER = ".parked as $parked | .input | ("
"""What every program is wrapped in, on the program's own first line so jq's line numbers are the
author's; the program follows and a newline closes it (so a trailing ``# comment`` cannot swallow
the closing parenthesis). Module directives (``import``, ``include``) cannot follow it, so they do
not compile, and ``$parked`` is the only variable a program gets beyond jq's own."""

MAX_VALUES = 2
"""Values taken from a program's output: enough to tell one from more than one; a third is never
computed."""

MAX_FRAME_BYTES = 64 * 2**20
"""A frame larger than this is a broken peer, not a request."""


class Check(msgspec.Struct, frozen=True, tag="check"):
    """Compile ``program`` (wrapped), nothing more."""

    program: str


class Run(msgspec.Struct, frozen=True, tag="run"):
    """Run each program, in order, over ``document`` (JSON text: ``{"parked": [...], "input": ...}``)."""

    programs: list[str]
    document: str


class Ready(msgspec.Struct, frozen=True, tag="ready"):
    """Sent once, when the child has started and is limited."""


class Compiled(msgspec.Struct, frozen=True, tag="compiled"):
    """The answer to a ``Check`` that compiled."""


class Values(msgspec.Struct, frozen=True, tag="values"):
    """The first values (at most ``MAX_VALUES``) one program yielded, each as JSON text."""

    values: list[bytes]


class Failed(msgspec.Struct, frozen=True, tag="failed"):
    """A program that did not compile, failed, yielded a value too large, or ran out of memory."""

    stage: Literal["compile", "runtime", "large", "memory"]
    message: str


Request = Check | Run
Reply = Ready | Compiled | Values | Failed


class ProgramCache:
    """Compiled programs by source, least recently used first; compile errors are kept too.

    Compiling costs about a hundred times more than running a small program, and a door runs the
    same few programs on every visit.
    """

    def __init__(self, size: int) -> None:
        self._size = size
        self._cache: OrderedDict[str, object] = OrderedDict()

    def get(self, program: str) -> object:
        """The compiled program, or a ``Failed`` for one that does not compile."""
        found = self._cache.get(program)
        if found is not None:
            self._cache.move_to_end(program)
            return found
        compiled: object
        try:
            compiled = jq.compile(f"{WRAPPER}{program}\n)")
        except ValueError as exc:
            compiled = Failed(stage="compile", message=str(exc))
        self._cache[program] = compiled
        if len(self._cache) > self._size:
            self._cache.popitem(last=False)
        return compiled


def _run_one(compiled: object, document: str, max_output_bytes: int) -> Values | Failed:
    if isinstance(compiled, Failed):
        return compiled
    values: list[bytes] = []
    try:
        outputs = iter(compiled.input_text(document))  # type: ignore[attr-defined]
        for value in itertools.islice(outputs, MAX_VALUES):
            encoded = msgspec.json.encode(value)
            if len(encoded) > max_output_bytes:
                return Failed(stage="large", message="")
            values.append(encoded)
    except MemoryError:
        return Failed(stage="memory", message="")
    except Exception as exc:  # noqa: BLE001 - any failure of an author's program is that program's error
        return Failed(stage="runtime", message=str(exc)[:1000])
    return Values(values=values)


def _limit_cpu(budget_seconds: int) -> None:
    """Let the next request use at most ``budget_seconds`` of CPU beyond what was used so far."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    soft = math.ceil(usage.ru_utime + usage.ru_stime) + budget_seconds
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))


def _read_exactly(stream: object, size: int) -> bytes | None:
    data: bytes = stream.read(size)  # type: ignore[attr-defined]
    return data if len(data) == size else None


def serve(memory_bytes: int, cpu_seconds: int, max_output_bytes: int, cache_size: int) -> None:
    """Limit this process, then answer requests on standard input until it closes."""
    os.environ.clear()
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if memory_bytes > 0:
        resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    out = os.fdopen(os.dup(1), "wb")
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.close(devnull)
    requests = sys.stdin.buffer
    encoder = msgspec.msgpack.Encoder()
    decoder = msgspec.msgpack.Decoder(Request)
    programs = ProgramCache(cache_size)

    def send(reply: Reply) -> None:
        body = encoder.encode(reply)
        out.write(len(body).to_bytes(4, "big") + body)
        out.flush()

    send(Ready())
    while True:
        head = _read_exactly(requests, 4)
        if head is None:
            return
        size = int.from_bytes(head, "big")
        body = _read_exactly(requests, size) if size <= MAX_FRAME_BYTES else None
        if body is None:
            return
        request = decoder.decode(body)
        _limit_cpu(cpu_seconds)
        if isinstance(request, Check):
            compiled = programs.get(request.program)
            send(compiled if isinstance(compiled, Failed) else Compiled())
            continue
        for program in request.programs:
            reply = _run_one(programs.get(program), request.document, max_output_bytes)
            send(reply)
            if isinstance(reply, Failed):
                break


def main(argv: list[str]) -> None:
    memory_bytes, cpu_seconds, max_output_bytes, cache_size = (int(arg) for arg in argv)
    serve(memory_bytes, cpu_seconds, max_output_bytes, cache_size)


if __name__ == "__main__":
    main(sys.argv[1:])
