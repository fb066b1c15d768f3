"""Load on a running ``Shape``, every operation recorded into a ``History`` for the checker.

- sync askers: ``ask_user(question, timeout=...)`` in a loop; the question is unique and the
  answerer answers it with its own text, so the returned value says which answer came back;
- external askers: an ``external`` question whose link builder hands the callback URL to a task
  that POSTs ``{"q": question}`` to the callback door of either door replica;
- parked runs: runs of ``tests.faults.flows:faulty`` started with their own run id; the run parks
  on a question (its input) that the answerer answers;
- the answerer: one SSE client plus a sweep of the list door, answering through either door
  replica, then reading the outcome back from the other replica (read after write);
- SSE clients that reconnect with ``Last-Event-ID`` when their door breaks and every few seconds
  on purpose, keeping every (id, event) they saw.

An operation's result is ``ok``, ``refused`` (Layby said no: the error type and message, or the
HTTP status and body) or ``indeterminate`` (a transport error or a timeout: it may or may not
have happened).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from layby.sdk import Client, connect
from layby_contracts.errors import LaybyError
from tests.conftest import OPERATOR
from tests.faults.harness import Shape

AUTH = {"Authorization": f"Bearer {OPERATOR}"}
SYNC, EXTERNAL, PARK = "sync-", "ext-", "park-"
"""Question prefixes: which generator asked it (the answerer answers sync and park questions)."""
ASK_TIMEOUT = 30.0


@dataclass
class Op:
    """One operation a client tried, as the client saw it."""

    kind: str
    """``ask``, ``external_ask``, ``answer``, ``callback``, ``run_start``, ``read_after_answer``."""
    ids: dict[str, str]
    start: float
    end: float = 0.0
    result: str = ""
    """``ok``, ``refused``, ``indeterminate``; ``cancelled`` when the load stopped it."""
    error: str = ""
    message: str = ""
    status: int | None = None
    value: Any = None
    door: int | None = None


@dataclass
class Segment:
    """One connection of an SSE client: what it sent, what the door said, the frames it got."""

    door: int
    start: float
    sent_last_id: int | None
    end: float = 0.0
    status: int | None = None
    stream_seq: int | None = None
    frames: list[tuple[int, str, str]] = field(default_factory=list)
    """(id, event, interaction id); ``stream.evicted`` frames are kept with an empty id."""
    reason: str = ""


@dataclass
class SseHistory:
    name: str
    segments: list[Segment] = field(default_factory=list)


@dataclass
class History:
    ops: list[Op] = field(default_factory=list)
    sse: list[SseHistory] = field(default_factory=list)
    ask_timeout: float = ASK_TIMEOUT

    def begin(self, kind: str, door: int | None = None, **ids: str) -> Op:
        op = Op(kind=kind, ids=dict(ids), start=time.time(), door=door)
        self.ops.append(op)
        return op


def _done(op: Op, result: str, **fields: Any) -> Op:
    op.end = time.time()
    op.result = result
    for key, value in fields.items():
        setattr(op, key, value)
    return op


def _refused(op: Op, exc: LaybyError) -> None:
    _done(op, "refused", error=type(exc).__name__, message=str(exc))
    found = getattr(exc, "interaction_id", "")
    if found:
        op.ids["interaction_id"] = found


def _indeterminate(op: Op, exc: BaseException) -> None:
    _done(op, "indeterminate", error=type(exc).__name__, message=str(exc))


async def _sdk_call(op: Op, call: Awaitable[Any], *, keep_value: bool = True) -> bool:
    """Await the SDK ``call`` of ``op`` and record how it ended: ok (with the value it returned,
    when ``keep_value``), refused, cancelled (raised again) or indeterminate. True when ok."""
    try:
        value = await call
    except LaybyError as exc:
        _refused(op, exc)
    except asyncio.CancelledError:
        _done(op, "cancelled")
        raise
    except Exception as exc:
        _indeterminate(op, exc)
    else:
        _done(op, "ok", **({"value": value} if keep_value else {}))
        return True
    return False


async def _http_call(op: Op, request: Awaitable[httpx.Response]) -> httpx.Response | None:
    """Await the HTTP ``request`` of ``op`` and record its response (``_http_result``), or the
    transport error as indeterminate (then None)."""
    try:
        resp = await request
    except httpx.HTTPError as exc:
        _indeterminate(op, exc)
        return None
    _http_result(op, resp)
    return resp


def _http_result(op: Op, resp: httpx.Response) -> None:
    """2xx ok; 5xx indeterminate (an append may have landed before the error); else refused."""
    try:
        body: Any = resp.json()
    except ValueError:
        body = resp.text[:200]
    if resp.status_code < 300:
        _done(op, "ok", status=resp.status_code, value=body)
    elif resp.status_code >= 500:
        _done(
            op, "indeterminate", status=resp.status_code, error=f"HTTP {resp.status_code}", message=str(body)
        )
    else:
        message = body.get("error", "") if isinstance(body, dict) else str(body)
        _done(op, "refused", status=resp.status_code, error=f"HTTP {resp.status_code}", message=message)


class Load:
    """The generators, started together on ``shape`` and stopped together."""

    def __init__(
        self,
        shape: Shape,
        history: History,
        *,
        askers: int = 3,
        external_askers: int = 1,
        runs_per_second: float = 1.0,
        max_open_runs: int = 10,
        sse_clients: int = 2,
        reconnect_every: tuple[float, float] = (3.0, 7.0),
    ) -> None:
        self.shape = shape
        self.history = history
        self.askers = askers
        self.external_askers = external_askers
        self.runs_per_second = runs_per_second
        self.max_open_runs = max_open_runs
        self.sse_clients = sse_clients
        self.reconnect_every = reconnect_every
        self.stopping = asyncio.Event()
        self.client: Client | None = None
        self.http: httpx.AsyncClient | None = None
        self._askers: list[asyncio.Task[None]] = []
        self._background: list[asyncio.Task[None]] = []
        self._answering: dict[str, asyncio.Task[None]] = {}
        self.run_tags: dict[str, str] = {}
        """run id -> the tag (question) it parks on, for every run start tried."""

    @property
    def doors(self) -> list[str]:
        return self.shape.door_urls

    async def start(self) -> None:
        settings = self.shape.config
        self.client = await connect(nats_url=settings.nats_url, token=OPERATOR, settings=settings)
        self.http = httpx.AsyncClient(headers=AUTH, timeout=httpx.Timeout(10.0))
        spawn = asyncio.create_task
        self._askers = [spawn(self._sync_asker()) for _ in range(self.askers)]
        self._askers += [spawn(self._external_asker()) for _ in range(self.external_askers)]
        if self.runs_per_second > 0:
            self._askers.append(spawn(self._runner()))
        answerer = SseHistory("answerer")
        self.history.sse.append(answerer)
        self._background = [
            spawn(self._sse_client(answerer, on_frame=self._on_inbox_frame, deliberate=False)),
            spawn(self._sweep_inbox()),
        ]
        for i in range(self.sse_clients):
            mine = SseHistory(f"sse-{i}")
            self.history.sse.append(mine)
            self._background.append(spawn(self._sse_client(mine, on_frame=None, deliberate=True)))

    async def stop(
        self, runs_done: Callable[[], Awaitable[set[str]]] | None = None, *, timeout: float = 60
    ) -> None:
        """No new operations; in-flight asks run to their end and, with ``runs_done``, every run
        started is answered until ``runs_done`` reports it finished (the answerer still answers);
        then everything else stops."""
        self.stopping.set()
        if self._askers:
            await asyncio.wait(self._askers, timeout=ASK_TIMEOUT + 15)
        if runs_done is not None:
            await self._wait_runs_finished(runs_done, timeout)
        for task in self._askers:
            task.cancel()
        answering = list(self._answering.values())
        if answering:
            await asyncio.wait(answering, timeout=15)
        for task in [*self._background, *answering]:
            task.cancel()
        await asyncio.gather(*self._askers, *self._background, *answering, return_exceptions=True)
        for op in self.history.ops:
            if not op.result:
                _done(op, "cancelled")
        for sse in self.history.sse:
            for seg in sse.segments:
                if not seg.end:
                    seg.end = time.time()
        if self.http is not None:
            await self.http.aclose()
        if self.client is not None:
            with contextlib.suppress(Exception):
                await self.client.close()

    async def _wait_runs_finished(self, runs_done: Callable[[], Awaitable[set[str]]], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        started = {
            op.ids["run_id"] for op in self.history.ops if op.kind == "run_start" and op.result == "ok"
        }
        while time.monotonic() < deadline:
            with contextlib.suppress(Exception):
                if started <= await runs_done():
                    return
            await asyncio.sleep(0.5)

    # -- askers ---------------------------------------------------------------------------------

    async def _sync_asker(self) -> None:
        assert self.client is not None
        while not self.stopping.is_set():
            question = f"{SYNC}{uuid.uuid4()}"
            op = self.history.begin("ask", question=question)
            if not await _sdk_call(op, self.client.ask_user(question, timeout=self.history.ask_timeout)):
                await asyncio.sleep(0.2)

    async def _external_asker(self) -> None:
        assert self.client is not None
        while not self.stopping.is_set():
            question = f"{EXTERNAL}{uuid.uuid4()}"
            op = self.history.begin("external_ask", question=question)
            posting: list[asyncio.Task[None]] = []

            def link(callback_url: str, question: str = question, posting: list[Any] = posting) -> str:
                posting.append(asyncio.create_task(self._call_back(callback_url, question)))
                return "https://pay.example/checkout"

            await _sdk_call(
                op,
                self.client.ask_user(
                    question, answer_format="external", link=link, timeout=self.history.ask_timeout
                ),
            )
            if posting:
                await asyncio.wait(posting, timeout=5)  # its 200 may still be on its way back
            for task in posting:
                task.cancel()
            await asyncio.gather(*posting, return_exceptions=True)

    async def _call_back(self, callback_url: str, question: str) -> None:
        """POST the payload to the callback door of either replica until it is taken (or seen
        taken); a 404 may be a callback that beat its question: try again shortly."""
        assert self.http is not None
        ticket_path = callback_url.split("/api/", 1)[1]
        deadline = time.monotonic() + ASK_TIMEOUT
        while time.monotonic() < deadline:
            door = random.randrange(len(self.doors))
            op = self.history.begin("callback", door=door, question=question)
            resp = await _http_call(
                op, self.http.post(f"{self.doors[door]}/api/{ticket_path}", json={"q": question})
            )
            if resp is not None and resp.status_code == 200:
                return
            await asyncio.sleep(0.5)

    async def _runner(self) -> None:
        assert self.client is not None
        while not self.stopping.is_set():
            started = sum(1 for op in self.history.ops if op.kind == "run_start" and op.result == "ok")
            open_runs = started - self._finished_runs()
            if open_runs < self.max_open_runs:
                run_id, tag = str(uuid.uuid4()), f"{PARK}{uuid.uuid4()}"
                self.run_tags[run_id] = tag
                op = self.history.begin("run_start", run_id=run_id, question=tag)
                await _sdk_call(op, self.client.start_run("faulty", tag, run_id=run_id), keep_value=False)
            await asyncio.sleep(1 / self.runs_per_second)

    def _finished_runs(self) -> int:
        """Runs whose question was answered (ok): they no longer hold the inbox."""
        answered = {
            op.ids.get("question") for op in self.history.ops if op.kind == "answer" and op.result == "ok"
        }
        return sum(1 for tag in self.run_tags.values() if tag in answered)

    # -- the answerer ---------------------------------------------------------------------------

    def _on_inbox_frame(self, event: str, data: dict[str, Any]) -> None:
        if event == "interaction.add":
            self._answer_soon(data["interaction_id"], data["question"])

    def _answer_soon(self, interaction_id: str, question: str) -> None:
        if not question.startswith((SYNC, PARK)) or interaction_id in self._answering:
            return
        self._answering[interaction_id] = asyncio.create_task(self._answer(interaction_id, question))

    async def _sweep_inbox(self) -> None:
        """The list door, every second, on either replica: what the stream may not have shown."""
        assert self.http is not None
        while True:
            door = random.randrange(len(self.doors))
            with contextlib.suppress(httpx.HTTPError, ValueError, KeyError, TypeError):
                resp = await self.http.get(f"{self.doors[door]}/api/interactions", params={"pageSize": 200})
                for item in resp.json()["data"]["items"]:
                    self._answer_soon(item["interaction_id"], item["question"])
            await asyncio.sleep(1.0)

    async def _answer(self, interaction_id: str, question: str) -> None:
        """Answer with the question's own text through either door until one takes it (200) or the
        log says it is decided (409); then read the outcome back from the other door replica."""
        assert self.http is not None
        deadline = time.monotonic() + ASK_TIMEOUT + 5
        while time.monotonic() < deadline:
            door = random.randrange(len(self.doors))
            op = self.history.begin("answer", door=door, interaction_id=interaction_id, question=question)
            resp = await _http_call(
                op,
                self.http.post(
                    f"{self.doors[door]}/api/interactions/{interaction_id}/answer", json={"answer": question}
                ),
            )
            if resp is not None and resp.status_code == 200:
                if question.startswith(SYNC):
                    await self._read_after(interaction_id, question, 1 - door if len(self.doors) > 1 else 0)
                return
            if resp is not None and resp.status_code == 409:
                return
            await asyncio.sleep(0.3)

    async def _read_after(self, interaction_id: str, question: str, door: int) -> None:
        assert self.http is not None
        op = self.history.begin(
            "read_after_answer", door=door, interaction_id=interaction_id, question=question
        )
        await _http_call(
            op,
            self.http.get(
                f"{self.doors[door]}/api/interactions/{interaction_id}/outcome", params={"wait": "0"}
            ),
        )

    # -- SSE clients ----------------------------------------------------------------------------

    async def _sse_client(
        self,
        record: SseHistory,
        *,
        on_frame: Callable[[str, dict[str, Any]], None] | None,
        deliberate: bool,
    ) -> None:
        """Connect, read, reconnect with the last id seen (to the other door, or either when one
        is down), forever; ``deliberate``: also drop the connection every few seconds."""
        last_id: int | None = None
        door = random.randrange(len(self.doors))
        async with httpx.AsyncClient(headers=AUTH, timeout=httpx.Timeout(10.0, read=40.0)) as http:
            while True:
                seg = Segment(door=door, start=time.time(), sent_last_id=last_id)
                record.segments.append(seg)
                headers = {"Last-Event-ID": str(last_id)} if last_id is not None else {}
                hold = random.uniform(*self.reconnect_every) if deliberate else None
                try:
                    async with asyncio.timeout(hold):
                        last_id = await self._read_stream(http, door, headers, seg, last_id, on_frame)
                    seg.reason = "ended"
                except TimeoutError:
                    seg.reason = "deliberate"
                except httpx.HTTPError as exc:
                    seg.reason = f"broken: {type(exc).__name__}"
                finally:
                    seg.end = time.time()
                    if seg.frames:
                        last_id = max((f[0] for f in seg.frames), default=last_id)
                    elif last_id is None and seg.status == 200:
                        last_id = seg.stream_seq  # its frames would have been the events after it
                if seg.status not in (None, 200) or seg.reason.startswith("broken"):
                    await asyncio.sleep(0.2)
                door = (door + 1) % len(self.doors)

    async def _read_stream(
        self,
        http: httpx.AsyncClient,
        door: int,
        headers: dict[str, str],
        seg: Segment,
        last_id: int | None,
        on_frame: Callable[[str, dict[str, Any]], None] | None,
    ) -> int | None:
        async with http.stream("GET", f"{self.doors[door]}/api/interactions/stream", headers=headers) as resp:
            seg.status = resp.status_code
            if resp.status_code != 200:
                return last_id
            seg.stream_seq = int(resp.headers.get("layby-stream-seq", "0") or 0)
            fields: dict[str, str] = {}
            async for line in resp.aiter_lines():
                if line.startswith(":"):
                    continue
                if line:
                    key, _, value = line.partition(":")
                    fields[key] = value[1:] if value.startswith(" ") else value
                    continue
                if not fields:
                    continue
                event, data = fields.get("event", ""), json.loads(fields.get("data", "null"))
                frame_id = int(fields["id"]) if fields.get("id") else 0
                fields = {}
                if event == "stream.evicted":
                    seg.frames.append((frame_id, event, ""))
                    return frame_id
                iid = data.get("interaction_id", "") if isinstance(data, dict) else ""
                seg.frames.append((frame_id, event, iid))
                last_id = frame_id
                if on_frame is not None and isinstance(data, dict):
                    on_frame(event, data)
        return last_id
