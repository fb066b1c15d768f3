"""LangGraph in the peer workload: a node calling ``interrupt()``, resumed with ``Command(resume=...)``.

    .venv/bin/python bench/peers/peer_langgraph.py [--seconds 10] [--concurrency 1 100]
                                                   [--database-url postgresql://...]

A one-node graph (START → ask → END) compiled with LangGraph's PostgreSQL checkpointer
(``AsyncPostgresSaver.from_conn_string``, its documented set-up, default durability). A run is
``graph.ainvoke({"question": q})`` on a thread of its own, which stops at ``interrupt(q)`` and
returns the interrupt: that is when the question is seen. The answer is
``graph.ainvoke(Command(resume="ok"))`` on the same thread, which runs the node to its end; the
run has resumed when that returns the state with the answer.

PostgreSQL: without --database-url, an embedded PostgreSQL 18 in a temporary directory, started
with the same settings as `layby up`'s (fsync on), so its CPU can be counted alone. With
--database-url, a fresh database made there and dropped afterwards (that server's CPU is shared
with whatever else uses it, so it is not counted). LangGraph is a library: the graph runs in this
process, so its CPU is in the client column. How it is timed: bench/peers/_harness.py.
"""

from __future__ import annotations

import argparse
import asyncio
import secrets
import sys
import tempfile
from pathlib import Path
from typing import Any, TypedDict

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _harness as h

SYSTEM = "LangGraph"


class AskState(TypedDict, total=False):
    question: str
    answer: str


def ask_node(state: AskState) -> AskState:
    from langgraph.types import interrupt

    return {"answer": interrupt(state["question"])}


def build(checkpointer: Any) -> Any:
    from langgraph.graph import END, START, StateGraph

    builder = StateGraph(AskState)
    builder.add_node("ask", ask_node)
    builder.add_edge(START, "ask")
    builder.add_edge("ask", END)
    return builder.compile(checkpointer=checkpointer)


class LangGraphPeer:
    name = SYSTEM

    def __init__(self, graph: Any) -> None:
        self.graph = graph
        self.waiting: dict[str, asyncio.Future[str]] = {}

    async def open(self, workload: h.Workload, n: int, answerers: int) -> None:
        pass

    @staticmethod
    def _config(question: str) -> dict[str, Any]:
        return {"configurable": {"thread_id": question}}

    async def run(self, question: str, workload: h.Workload) -> str:
        out = await self.graph.ainvoke({"question": question}, self._config(question))
        if not out.get("__interrupt__"):
            raise RuntimeError(f"the graph did not stop at the interrupt: {out!r}")
        resumed: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self.waiting[question] = resumed
        workload.seen(question, question)
        return await resumed

    async def answer(self, ref: Any) -> None:
        from langgraph.types import Command

        out = await self.graph.ainvoke(Command(resume=h.ANSWER), self._config(ref))
        self.waiting.pop(ref).set_result(out["answer"])

    async def close(self) -> None:
        pass


def missing() -> str | None:
    absent = h.module_missing("langgraph", "langgraph.checkpoint.postgres", "psycopg")
    return h.not_installed(absent, h.pip_hint()) if absent else None


async def run_all(args: argparse.Namespace, report: h.Report) -> None:
    import psycopg
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

    embedded = None
    tmp = None
    admin_url = args.database_url
    dbname = f"peers_langgraph_{secrets.token_hex(4)}"
    pids: dict[str, int] = {}
    if admin_url is None:
        from layby_server.operations.embedded import EmbeddedPostgres

        tmp = tempfile.TemporaryDirectory(prefix="peers-langgraph-")
        embedded = EmbeddedPostgres(Path(tmp.name) / "pg").start()
        admin_url = embedded.url
        assert embedded.proc is not None
        pids = {"PostgreSQL": embedded.proc.pid}
    async with await psycopg.AsyncConnection.connect(admin_url, autocommit=True) as conn:
        await conn.execute(f"CREATE DATABASE {dbname}")
        server_version = (await (await conn.execute("SHOW server_version")).fetchone() or ["?"])[0]
    url = admin_url.rsplit("/", 1)[0] + "/" + dbname
    report.versions = {
        "langgraph": h.version_of("langgraph"),
        "langgraph-checkpoint-postgres": h.version_of("langgraph-checkpoint-postgres"),
        "psycopg": h.version_of("psycopg"),
        "PostgreSQL": str(server_version).split()[0],
    }
    report.setup = "a one-node graph with interrupt(), AsyncPostgresSaver on " + (
        "an embedded PostgreSQL (fsync on)" if embedded else "the given PostgreSQL (its CPU not counted)"
    )
    try:
        async with AsyncPostgresSaver.from_conn_string(url) as saver:
            await saver.setup()
            graph = build(saver)
            for n in args.concurrency:
                point = await h.level(LangGraphPeer(graph), n, lambda: pids, args)
                if embedded is None:
                    point.system_cpu_ms = float("nan")
                report.points.append(point)
    finally:
        async with await psycopg.AsyncConnection.connect(admin_url, autocommit=True) as conn:
            await conn.execute(f"DROP DATABASE IF EXISTS {dbname} WITH (FORCE)")
        if embedded is not None:
            embedded.stop()
        if tmp is not None:
            tmp.cleanup()


if __name__ == "__main__":
    h.main(
        __doc__ or "",
        SYSTEM,
        missing,
        run_all,
        lambda p: p.add_argument(
            "--database-url", help="an existing PostgreSQL (default: an embedded one); implies --no-netns"
        ),
    )
