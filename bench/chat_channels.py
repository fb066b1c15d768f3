"""Benchmark: Slack, Telegram, WhatsApp and Twilio channels over their provider stand-ins (docs/channels.md).

    python bench/chat_channels.py [--channel slack telegram whatsapp twilio] [--questions 1000]
                                  [--conversations 50] [--people N]

For each channel: starts the provider's stand-in (the one the tests use, from ``tests/standins``)
in a process of its own (bench/_chat_standin.py) and `layby up` with the channel's plugin pointed
at it. The stand-in is also the person: as soon as it stores a question message it records the
time and one of ``--people`` workers (default: one per conversation) taps Yes from the stand-in's
own event loop — the signed inbound request is built as the tests build it and POSTed to the
door's inbound webhook on a keep-alive connection pool. This process runs only the askers:
``--conversations`` concurrent conversations, each asking confirm questions over the channel with
the SDK's blocking `ask_user`. Every time is wall-clock (``time.time()``) on one machine, so
times from the two processes compare.

Prints, per channel: questions delivered per second (questions / (last posted - start)), ask →
the provider's API stores the message p50/p99, the door's acknowledgement of the inbound webhook
(tap POST sent → the door's response) p50/p99 (Slack wants it under 3 s), the tap POST sent → the
asker returns p50/p99, full cycles per second, and the CPU each process used during the measured
window in ms per cycle (this process, the stand-in, and every `layby up` process: NATS,
PostgreSQL, each `layby.cli serve <service>`), so it shows where the time goes.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import multiprocessing
import os
import sys
import time
from pathlib import Path
from typing import Any

import psutil

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
import _chat_standin
from _up import free_port, pct, print_profile, profiled, start_up, table_head

from layby.sdk import connect
from layby_server.settings import load_settings
from tests.standins import slack as sl
from tests.standins import telegram as tg
from tests.standins import whatsapp as wa
from tests.standins import twilio as tw

WARM_UP = 10
TWILIO_THINK = 100
"""ms a Twilio person waits at least before texting back: a text answers the last question the
delivery service has recorded for its number, which it records right after Twilio accepts the
send; a reply faster than that record answers the question before (a person cannot text that fast)."""
EXTRA = {  # the machine's CPU outside the processes measured one by one
    "interrupts": "kernel: irq + softirq (loopback TCP among it)",
    "other": "rest of the machine (other processes, kernel threads)",
    "stolen": "stolen by the hypervisor",
}


def _label(proc: psutil.Process) -> str:
    """A short name for a process of the bench or of `layby up`."""
    try:
        cmd = proc.cmdline()
        name = proc.name()
    except psutil.Error:
        return "gone"
    if "serve" in cmd and cmd.index("serve") + 1 < len(cmd):
        return f"serve {cmd[cmd.index('serve') + 1]}"
    if "nats" in name:
        return "NATS"
    if "postgres" in name or any("postgres" in Path(c).name for c in cmd[:1]):
        return "PostgreSQL"
    if "up" in cmd and "layby.cli" in cmd:
        return "layby up"
    return name


class Cpu:
    """CPU seconds (user + system) per labelled process group, between ``start`` and ``stop``;
    processes that appear in between start from zero."""

    def __init__(self, named: dict[str, int], tree: int) -> None:
        self.named, self.tree = named, tree
        self.before: dict[int, tuple[str, float]] = {}

    def _sample(self) -> dict[int, tuple[str, float]]:
        procs = [(label, psutil.Process(pid)) for label, pid in self.named.items()]
        root = psutil.Process(self.tree)
        with contextlib.suppress(psutil.Error):
            procs += [(_label(p), p) for p in [root, *root.children(recursive=True)]]
        out: dict[int, tuple[str, float]] = {}
        for label, proc in procs:
            with contextlib.suppress(psutil.Error):
                times = proc.cpu_times()
                out[proc.pid] = (label, times.user + times.system)
        return out

    @staticmethod
    def _machine() -> tuple[float, float, float]:
        """The whole machine's busy CPU seconds (every process, the kernel), the kernel's
        interrupt handling in them (irq, softirq: loopback TCP among it), and stolen seconds."""
        t = psutil.cpu_times()
        idle = t.idle + getattr(t, "iowait", 0.0)
        steal = getattr(t, "steal", 0.0)
        guest = getattr(t, "guest", 0.0) + getattr(t, "guest_nice", 0.0)
        return sum(t) - idle - steal - guest, getattr(t, "irq", 0.0) + getattr(t, "softirq", 0.0), steal

    def start(self) -> None:
        self.before = self._sample()
        self.machine = self._machine()

    def stop(self) -> dict[str, float]:
        """Seconds per label; ``interrupts`` is the kernel's irq and softirq time, ``other`` the
        rest of the machine (other processes, kernel threads), ``stolen`` what the hypervisor took."""
        busy, interrupts, steal = self._machine()
        used: dict[str, float] = {}
        for pid, (label, seconds) in self._sample().items():
            earlier = self.before.get(pid, (label, 0.0))[1]
            used[label] = used.get(label, 0.0) + seconds - earlier
        used["interrupts"] = interrupts - self.machine[1]
        used["other"] = max(0.0, busy - self.machine[0] - sum(used.values()))
        used["stolen"] = steal - self.machine[2]
        return used


async def run_channel(name: str, args: argparse.Namespace) -> dict[str, Any]:
    port = free_port()
    door = f"http://127.0.0.1:{port}"
    target = f"{door}/api/channels/{name}/events"
    ctx = multiprocessing.get_context("spawn")
    conn, child_conn = ctx.Pipe()
    child = ctx.Process(
        target=_chat_standin.serve,
        args=(
            name,
            target,
            args.people or args.conversations,
            args.person_client,
            max(args.think, TWILIO_THINK if name == "twilio" else 0) / 1000,
            child_conn,
        ),
    )
    child.start()
    child_conn.close()
    up = None
    try:
        if not await asyncio.to_thread(conn.poll, 60):
            raise RuntimeError("the stand-in did not start")
        _, api_url, file_url = conn.recv()
        if name == "slack":
            config = {
                "plugin": "slack",
                "bot_token": "bot",
                "signing_secret": "signing",
                "api_url": api_url,
                "default_recipient": sl.CHANNEL,
            }
            secrets = f"bot:{sl.BOT_TOKEN},signing:{sl.SIGNING_SECRET}"
        elif name == "whatsapp":
            config = {
                "plugin": "whatsapp",
                "access_token": "token",
                "app_secret": "app",
                "verify_token": "verify",
                "phone_number_id": wa.PHONE_NUMBER_ID,
                "api_url": api_url,
                "default_recipient": _chat_standin.WA_PERSON,
            }
            secrets = f"token:{wa.TOKEN},app:{wa.APP_SECRET},verify:{wa.VERIFY_TOKEN}"
        elif name == "twilio":
            config = {
                "plugin": "twilio",
                "account_sid": tw.ACCOUNT_SID,
                "auth_token": "token",
                "from": tw.NUMBER,
                "public_url": target,
                "api_url": api_url,
            }
            secrets = f"token:{tw.AUTH_TOKEN}"
        else:
            config = {
                "plugin": "telegram",
                "bot_token": "bot",
                "secret_token": "hook",
                "api_url": api_url,
                "file_url": file_url,
                "default_recipient": str(_chat_standin.PERSON),
            }
            secrets = f"bot:{tg.TOKEN},hook:{_chat_standin.HOOK}"
        up = start_up(
            **profiled(args.profile, _profile_out(name, args.profile)),
            LAYBY_HTTP_PORT=str(port),
            INTERACTIONS_PUBLIC_BASE_URL=door,
            LAYBY_WEBHOOK_SECRETS=secrets,
            LAYBY_CHANNELS=json.dumps({name: config}),
        )
        settings = load_settings({}, max_concurrent=None, public_base_url=door)
        client = await connect(nats_url=up.nats_url, token=up.token, settings=settings)
        # Twilio: one person's number per conversation (a text answers the last question sent to
        # its number); the others take the channel's default recipient.
        to = {"recipient": _chat_standin.phone(0)} if name == "twilio" else {}
        for i in range(WARM_UP):
            await client.ask_user(f"warm {i}?", answer_format="confirm", channel=name, timeout=60, **to)
        asked: dict[str, float] = {}
        returned: dict[str, float] = {}
        todo: asyncio.Queue[int] = asyncio.Queue()
        for i in range(args.questions):
            todo.put_nowait(i)

        async def conversation(n: int) -> None:
            to = {"recipient": _chat_standin.phone(n)} if name == "twilio" else {}
            while not todo.empty():
                q = f"Deploy build {todo.get_nowait()}?"
                asked[q] = time.time()
                answer = await client.ask_user(q, answer_format="confirm", channel=name, timeout=600, **to)
                assert answer is True
                returned[q] = time.time()

        cpu = Cpu({"bench (askers)": os.getpid(), "stand-in + person": child.pid or 0}, up.proc.pid)
        conn.send("mark")
        lags: list[float] = []
        lagging = asyncio.create_task(_chat_standin._lag(lags))
        cpu.start()
        t0 = time.time()
        await asyncio.gather(*(conversation(n) for n in range(args.conversations)))
        elapsed = time.time() - t0
        used = cpu.stop()
        lagging.cancel()
        await client.close()
        for _ in range(200):  # the last taps' acknowledgements may still be on their way
            conn.send("records")
            got = conn.recv()
            records: dict[str, dict[str, Any]] = got["records"]
            if all("ack" in records.get(q, {}) for q in asked):
                break
            await asyncio.sleep(0.05)
    finally:
        if up is not None:  # Layby first: its delivery still talks to the stand-in while stopping
            up.stop()
        with contextlib.suppress(OSError):
            conn.send("stop")
        child.join(10)
        if child.is_alive():
            child.kill()
    mine = {q: records[q] for q in asked}
    failed = {q: r for q, r in mine.items() if r.get("status") != 200}
    if failed:
        q, r = next(iter(failed.items()))
        raise RuntimeError(f"{len(failed)} taps were not acknowledged with 200, e.g. {q!r}: {r}")
    return {
        "deliveries/s": args.questions / (max(r["posted"] for r in mine.values()) - t0),
        "deliver": _pair([r["posted"] - asked[q] for q, r in mine.items()]),
        "person": _pair([r["tap"] - r["posted"] for r in mine.values()]),
        "ack": _pair([r["ack"] - r["tap"] for r in mine.values()]),
        "wake": _pair([returned[q] - r["tap"] for q, r in mine.items()]),
        "cycles/s": args.questions / elapsed,
        "lag": (_pair(lags), _pair(got["lag"])),
        "elapsed": elapsed,
        "cpu": {label: seconds * 1000 / args.questions for label, seconds in used.items()},
    }


def _pair(values: list[float]) -> tuple[float, float]:
    return pct(values, 0.5), pct(values, 0.99)


def _profile_out(channel: str, service: str) -> str:
    return f"/tmp/layby-bench-{channel}-{service}.prof"


def _is_layby(label: str) -> bool:
    return label not in ("bench (askers)", "stand-in + person", *EXTRA)


def _order(label: str) -> tuple[int, str]:
    first = ("bench (askers)", "stand-in + person", "layby up", "NATS", "PostgreSQL")
    return (first.index(label), "") if label in first else (len(first), label)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--channel",
        nargs="+",
        default=["slack", "telegram", "whatsapp"],
        choices=["slack", "telegram", "whatsapp", "twilio"],
    )
    parser.add_argument("--questions", type=int, default=1000)
    parser.add_argument("--conversations", type=int, default=50)
    parser.add_argument(
        "--people", type=int, default=0, help="the stand-in's tapping workers (default: --conversations)"
    )
    parser.add_argument(
        "--person-client",
        default="lean",
        choices=["lean", "httpx", "httpx-pool"],
        help="how the stand-in's person POSTs taps: a raw keep-alive connection per person (lean), "
        "a keep-alive httpx.AsyncClient per person, or one httpx.AsyncClient with a pool of --people",
    )
    parser.add_argument(
        "--think",
        type=float,
        default=0,
        help="ms the person waits before tapping (0: at once, so the conversations saturate the machine; "
        f"twilio: at least {TWILIO_THINK})",
    )
    parser.add_argument(
        "--profile",
        metavar="SERVICE",
        help="cProfile `layby.cli serve SERVICE` (e.g. delivery) into "
        "/tmp/layby-bench-<channel>-SERVICE.prof "
        "and print its top functions",
    )
    args = parser.parse_args()
    if "twilio" in args.channel and args.conversations > _chat_standin.PHONES:
        parser.error(f"twilio: at most {_chat_standin.PHONES} conversations (one person's number each)")
    logging.getLogger("httpx").setLevel(logging.WARNING)
    rows = {name: asyncio.run(run_channel(name, args)) for name in args.channel}
    if args.profile:
        for name in rows:
            out = _profile_out(name, args.profile)
            print_profile(f"{args.profile} ({name}, cProfile, {out})", out, 20)
    table_head(
        f"| channel ({args.questions} questions, {args.conversations} conversations) | "
        + " | ".join(rows)
        + " |"
    )
    print("| deliveries/s | " + " | ".join(f"{r['deliveries/s']:.0f}" for r in rows.values()) + " |")
    for key, label in (
        ("deliver", "ask → posted p50 / p99"),
        ("ack", "inbound webhook acknowledged (tap POST → door's 200) p50 / p99"),
        ("wake", "reply → asker returns (tap POST → `ask_user` returns) p50 / p99"),
        ("person", "stand-in's person: posted → tap POST p50 / p99"),
    ):
        print(
            f"| {label} | "
            + " | ".join(f"{r[key][0]:.1f} / {r[key][1]:.1f} ms" for r in rows.values())
            + " |"
        )
    print("| full cycles/s | " + " | ".join(f"{r['cycles/s']:.0f}" for r in rows.values()) + " |")
    for i, label in enumerate(("bench (askers)", "stand-in + person")):
        cells = " | ".join(f"{r['lag'][i][0]:.1f} / {r['lag'][i][1]:.1f} ms" for r in rows.values())
        print(f"| harness check: {label} event-loop lag p50 / p99 | {cells} |")
    table_head("| CPU ms per cycle (measured window) | " + " | ".join(rows) + " |")
    labels = sorted({label for r in rows.values() for label in r["cpu"]} - set(EXTRA), key=_order)
    for label in labels:
        cells = " | ".join(f"{r['cpu'].get(label, 0.0):.2f}" for r in rows.values())
        print(f"| {label} | {cells} |")
    ours = [sum(v for k, v in r["cpu"].items() if k not in EXTRA) for r in rows.values()]
    print("| total (the processes above) | " + " | ".join(f"{t:.2f}" for t in ours) + " |")
    layby = [sum(v for k, v in r["cpu"].items() if _is_layby(k)) for r in rows.values()]
    print("| of which Layby (`layby up` and its children) | " + " | ".join(f"{t:.2f}" for t in layby) + " |")
    print(
        f"| bound: cycles/s if Layby had all {psutil.cpu_count()} cores | "
        + " | ".join(f"{psutil.cpu_count() * 1000 / t:.0f}" for t in layby)
        + " |"
    )
    for label, what in EXTRA.items():
        print(f"| {what} | " + " | ".join(f"{r['cpu'][label]:.2f}" for r in rows.values()) + " |")
    rate = [args.questions / 1000 / r["elapsed"] for r in rows.values()]  # ms per cycle → cores
    busy = " | ".join(
        f"{t * k:.2f} + {(r['cpu']['interrupts'] + r['cpu']['other']) * k:.2f}"
        for t, k, r in zip(ours, rate, rows.values(), strict=True)
    )
    print(f"| cores busy: the processes above + the rest (of {psutil.cpu_count()}) | {busy} |")


if __name__ == "__main__":
    main()
