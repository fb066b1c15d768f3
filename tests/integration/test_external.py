"""External questions and the public callback doors (docs/asking.md#external-questions, docs/doors/callback.md#the-callback-doors).

Real services. The asker's link builder creates a "checkout" on a local HTTP server that plays a
payment provider; the provider later POSTs a Stripe-signed event to the callback URL and the
asker wakes with the payload. The security properties are tested, not assumed.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from layby_contracts.errors import BadInput
from layby_server.settings import Settings
from tests.conftest import System
from tests.helpers import eventually

SECRET = "whsec_test_0123456789"
pytestmark = pytest.mark.settings(
    public_base_url="http://127.0.0.1:1",  # replaced per test by the door's own URL, see `base`
    webhook_secrets=f"payments:{SECRET},hub:gh-secret-value",
    callback_ask_wait_seconds=2.0,
)
STRIPE = {"name": "stripe", "config": {"secret": "payments"}}


def stripe_sign(body: bytes, secret: str = SECRET, at: int | None = None) -> str:
    stamp = int(time.time()) if at is None else at
    sig = hmac.new(secret.encode(), f"{stamp}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={stamp},v1={sig}"


def _fields(settings: Settings) -> dict[str, Any]:
    import msgspec

    return msgspec.structs.asdict(settings)


async def callback_of(system: System, question: str) -> tuple[str, str]:
    """(interaction id, callback URL) of a pending external question, from the list door."""
    async with system.http() as http:

        async def listed() -> list[dict[str, Any]]:
            items = (await http.get("/api/interactions")).json()["data"]["items"]
            return [item for item in items if item["question"] == question]

        item = (await eventually(listed, f"the question {question!r} in the list door"))[0]
    url = item["format_payload"]["url"]
    return item["interaction_id"], url.split("cb=")[1] if "cb=" in url else url


class Provider:
    """A local HTTP server that plays a payment provider: checkouts are created over HTTP."""

    def __init__(self) -> None:
        self.checkouts: dict[str, str] = {}

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = int(
            next(
                (ln.split(b":")[1] for ln in head.split(b"\r\n") if ln.lower().startswith(b"content-length")),
                b"0",
            )
        )
        body = json.loads(await reader.readexactly(length))
        checkout = f"cs_{uuid.uuid4().hex[:12]}"
        self.checkouts[checkout] = body["callback_url"]
        out = json.dumps({"id": checkout, "url": f"https://pay.example/{checkout}"}).encode()
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
            % (len(out), out)
        )
        await writer.drain()
        writer.close()


@pytest.fixture
async def provider() -> AsyncIterator[tuple[Provider, str]]:
    p = Provider()
    server = await asyncio.start_server(p.handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    yield p, f"http://127.0.0.1:{port}"
    server.close()
    await server.wait_closed()


async def test_a_payment_provider_posts_a_stripe_signed_event_and_the_asker_wakes_with_it(
    system: System, client: Any, provider: tuple[Provider, str]
) -> None:
    prov, prov_url = provider

    async def create_checkout(callback_url: str) -> str:
        async with httpx.AsyncClient() as http:
            resp = await http.post(
                f"{prov_url}/checkouts", json={"amount": 4200, "callback_url": callback_url}
            )
        return resp.json()["url"]

    schema = {
        "type": "object",
        "properties": {"type": {"const": "checkout.session.completed"}},
        "required": ["type"],
    }
    ask = asyncio.create_task(
        client.ask_user(
            "Pay the invoice",
            answer_format="external",
            link=create_checkout,
            schema=schema,
            verifier=STRIPE,
            timeout=30,
        )
    )
    await eventually(lambda: prov.checkouts, "the link builder to create a checkout")
    [(checkout, callback)] = prov.checkouts.items()
    assert callback.startswith(f"{system.url}/api/interactions/callback/")
    await callback_of(system, "Pay the invoice")  # recorded and projected (the link is built first)
    async with system.http() as http:
        items = (await http.get("/api/interactions")).json()["data"]["items"]
    [item] = items
    assert item["format_payload"]["url"] == f"https://pay.example/{checkout}"
    assert item["server_verified"] is True and "verifier" not in item["format_payload"]
    assert callback.rsplit("/", 1)[1] not in json.dumps(items)  # the ticket is in no frame
    event = json.dumps(
        {"type": "checkout.session.completed", "data": {"id": checkout, "amount": 4200}}
    ).encode()
    async with httpx.AsyncClient() as http:
        forged = await http.post(
            callback, content=event, headers={"Stripe-Signature": stripe_sign(event, "wrong")}
        )
        assert forged.status_code == 401 and forged.json() == {"error": "webhook verification failed"}
        stale = await http.post(
            callback, content=event, headers={"Stripe-Signature": stripe_sign(event, at=1)}
        )
        assert stale.status_code == 401
        good = await http.post(callback, content=event, headers={"Stripe-Signature": stripe_sign(event)})
        assert good.status_code == 200, good.text
        assert good.json()["data"]["status"] == "answered"
        replay = await http.post(callback, content=event, headers={"Stripe-Signature": stripe_sign(event)})
        assert replay.status_code == 200 and replay.json() == {"data": {"status": "already_answered"}}
        assert (
            replay.headers["cache-control"] == "no-store"
            and replay.headers["x-content-type-options"] == "nosniff"
        )
    assert await asyncio.wait_for(ask, 10) == json.loads(event)


async def test_a_template_link_carries_the_callback_and_query_parameters_answer_a_get_confirm_flow(
    system: System, client: Any
) -> None:
    ask = asyncio.create_task(
        client.ask_user(
            "Sign the NDA",
            answer_format="external",
            link="https://sign.example/{x}?cb={callback_url}",
            timeout=30,
        )
    )
    _, callback = await callback_of(system, "Sign the NDA")
    async with httpx.AsyncClient() as http:
        # A link scanner's GETs change nothing and see a byte-constant page.
        first = await http.get(callback + "?status=signed")
        second = await http.get(callback)
        assert first.status_code == second.status_code == 200 and first.content == second.content
        assert b"signed" not in first.content and b"<form method=post>" in first.content
        assert "default-src 'none'" in first.headers["content-security-policy"]
        # Nobody outside fakes an expiry: the reserved key is refused, body or query alike.
        faked = await http.post(callback, json={"layby:interaction_expired": True})
        faked_query = await http.post(callback + "?layby:interaction_expired=1")
        assert faked.status_code == faked_query.status_code == 400
        assert faked.json() == {
            "error": "answer must not carry the reserved key 'layby:interaction_expired'",
            "field": "layby:interaction_expired",
        }
        # The person presses the button: an empty POST, the query string is the answer.
        done = await http.post(callback + "?status=signed&tag=a&tag=b")
        assert done.status_code == 200
        after = await http.get(callback)
        assert b"already been answered" in after.content
    assert await asyncio.wait_for(ask, 10) == {"status": "signed", "tag": ["a", "b"]}


async def test_unknown_expired_malformed_and_pruned_tickets_get_one_byte_identical_404(
    system: System, client: Any
) -> None:
    ask = asyncio.create_task(
        client.ask_user(
            "Short-lived", answer_format="external", link="https://x.example/?cb={callback_url}", timeout=0.5
        )
    )
    _, callback = await callback_of(system, "Short-lived")
    with pytest.raises(Exception, match=r"pruned|gone|recorded"):
        await asyncio.wait_for(ask, 10)
    base = callback.rsplit("/", 1)[0]
    async with httpx.AsyncClient() as http:
        posts = [
            await http.post(url, json={"a": 1})
            for url in (callback, f"{base}/{'A' * 43}", f"{base}/short", f"{base}/{'<script>' * 6}")
        ]
        gets = [await http.get(url) for url in (callback, f"{base}/{'A' * 43}", f"{base}/short")]
    assert {r.status_code for r in posts} == {404} and len({r.content for r in posts}) == 1
    assert posts[0].json() == {"error": "not found"}
    assert {r.status_code for r in gets} == {404} and {r.content for r in gets} == {b"Not Found"}


async def test_the_schema_is_checked_before_the_claim_and_a_bad_payload_leaves_the_ticket_usable(
    system: System, client: Any
) -> None:
    schema = {"type": "object", "properties": {"amount": {"const": 4200}}, "required": ["amount"]}
    ask = asyncio.create_task(
        client.ask_user(
            "Pay",
            answer_format="external",
            link="https://x.example/?cb={callback_url}",
            schema=schema,
            timeout=30,
        )
    )
    _, callback = await callback_of(system, "Pay")
    async with httpx.AsyncClient() as http:
        wrong = await http.post(callback, json={"amount": 1})
        assert wrong.status_code == 400 and "field" not in wrong.json()
        not_object = await http.post(callback, content=b"[1,2]")
        assert not_object.status_code == 400 and not_object.json() == {"error": "body must be a JSON object"}
        ok = await http.post(callback, json={"amount": 4200})
        assert ok.status_code == 200
    assert await asyncio.wait_for(ask, 10) == {"amount": 4200}


async def test_an_oversized_body_is_413_before_the_ticket_is_looked_up(system: System) -> None:
    async def chunks() -> AsyncIterator[bytes]:
        for _ in range(10):
            yield b"x" * 8192

    async with httpx.AsyncClient() as http:
        resp = await http.post(
            f"{system.url}/api/interactions/callback/{'A' * 43}",
            content=chunks(),  # streamed: the door counts actual bytes, never a declared length
        )
    assert resp.status_code == 413 and resp.json() == {"error": "payload too large"}


async def test_a_broken_verifier_binding_fails_closed_with_500_and_consumes_nothing(
    system: System, client: Any
) -> None:
    ask = asyncio.create_task(
        client.ask_user(
            "Webhook",
            answer_format="external",
            link="https://x.example/?cb={callback_url}",
            verifier={"name": "github", "config": {"secret": "not-configured"}},
            timeout=30,
        )
    )
    _, callback = await callback_of(system, "Webhook")
    async with httpx.AsyncClient() as http:
        body = b'{"action":"approved"}'
        resp = await http.post(callback, content=body)
        assert resp.status_code == 500 and resp.json() == {"error": "webhook verification error"}
        assert (await http.get(callback)).content == b"Not Found"  # bound: GET reveals nothing
    ask.cancel()


async def test_external_ask_rules_name_the_field_before_anything_is_stored(
    system: System, client: Any
) -> None:
    cases: list[tuple[dict[str, Any], str]] = [
        ({"link": "https://x.example/no-placeholder"}, "link"),
        ({}, "link"),
        ({"link": 42}, "link"),
        (
            {
                "link": "https://x.example/{callback_url}",
                "verifier": {"name": "nope", "config": {"secret": "s"}},
            },
            "verifier.name",
        ),
        ({"link": "https://x.example/{callback_url}", "options": ["a"]}, "options"),
        ({"link": lambda cb: "ftp://x.example/"}, "link"),
    ]
    for kwargs, field in cases:
        with pytest.raises(BadInput) as info:
            await client.ask_user("Ext?", answer_format="external", timeout=5, **kwargs)
        assert info.value.field == field, (kwargs, info.value)
    with pytest.raises(BadInput) as info:
        await client.ask_user("Text?", link="https://x.example/{callback_url}", timeout=5)
    assert info.value.field == "link"
    async with system.http() as http:
        assert (await http.get("/api/interactions")).json()["data"]["total"] == 0


async def test_without_a_public_base_url_an_external_ask_raises_naming_the_variable(system: System) -> None:
    from layby.sdk import connect

    settings = Settings(**{**_fields(system.settings), "public_base_url": None})
    c = await connect(nats_url=system.settings.nats_url, token="op-token-0123456789abcdef", settings=settings)
    system.clients.append(c)
    with pytest.raises(BadInput, match="INTERACTIONS_PUBLIC_BASE_URL"):
        await c.ask_user("Ext?", answer_format="external", link="https://x.example/{callback_url}", timeout=5)


async def test_a_second_terminal_builds_the_link_from_the_base_url_layby_up_recorded(
    system: System, tmp_path: Any
) -> None:
    """docs/cli.md: a client on the machine running `layby up` needs no configuration — the runtime
    file carries the services' public base URL as well as where NATS is and the token."""
    import os

    from layby.runtime import Runtime
    from layby.sdk import connect
    from layby_server.operations.runtime import write_runtime

    write_runtime(
        tmp_path,
        Runtime(
            url=system.url,
            token="op-token-0123456789abcdef",
            nats_url=system.settings.nats_url or "",
            database_url="postgresql://unused",
            pid=os.getpid(),
            public_base_url=system.url,
        ),
    )
    settings = Settings(**{**_fields(system.settings), "public_base_url": None, "data_dir": str(tmp_path)})
    c = await connect(settings=settings)
    system.clients.append(c)
    links: list[str] = []

    def visit(callback_url: str) -> str:
        links.append(callback_url)
        return f"https://x.example/go?cb={callback_url}"

    task = asyncio.create_task(
        c.ask_user("Ext from a second terminal?", answer_format="external", link=visit, timeout=30)
    )
    await eventually(lambda: links, "the link built around the callback URL", timeout=10)
    assert links[0].startswith(f"{system.url}/")
    async with httpx.AsyncClient() as http:
        assert (await http.post(links[0], json={"ok": 1})).status_code == 200
    assert await asyncio.wait_for(task, 10) == {"ok": 1}


async def test_ask_external_wraps_a_tool_that_takes_a_callback_url(system: System, client: Any) -> None:
    """docs/asking.md#ask_external: the composed tool hides callback_url and adds question, answer_schema and
    timeout; the verifier comes from the author only; bad tools are refused when wrapped."""
    import inspect

    import layby

    created: list[tuple[str, str]] = []

    async def create_envelope(document: str, callback_url: str) -> str:
        created.append((document, callback_url))
        return f"https://sign.example/envelopes/{len(created)}"

    sign = layby.ask_external(create_envelope, client=client)
    params = inspect.signature(sign).parameters
    assert "callback_url" not in params and {"question", "answer_schema", "timeout", "document"} <= set(
        params
    )
    ask = asyncio.create_task(
        sign("Sign the contract", document="nda.pdf", answer_schema={"type": "object"}, timeout=30)
    )
    await eventually(lambda: created, "the link builder to create an envelope")
    [(document, callback)] = created
    assert document == "nda.pdf"
    await callback_of(system, "Sign the contract")  # the link is built before the ask is recorded
    async with httpx.AsyncClient() as http:
        assert (await http.post(callback, json={"signed": True})).status_code == 200
    assert await asyncio.wait_for(ask, 10) == {"signed": True}
    with pytest.raises(BadInput, match="callback_url is supplied"):
        await sign("Again", callback_url="https://evil.example/")

    def no_callback(document: str) -> str:
        return "https://x.example/"

    def control(question: str, callback_url: str) -> str:
        return "https://x.example/"

    def star(*args: Any, callback_url: str) -> str:
        return "https://x.example/"

    def kwargs(callback_url: str, **rest: Any) -> str:
        return "https://x.example/"

    for bad in (no_callback, control, star, kwargs):
        with pytest.raises(BadInput):
            layby.ask_external(bad)
    with pytest.raises(BadInput) as info:
        layby.ask_external(create_envelope, verifier={"name": "nope", "config": {"secret": "s"}})
    assert info.value.field == "verifier.name"


async def test_cli_asks_an_external_question_with_a_link_and_media(
    system: System, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from layby import cli

    for key, value in {
        "LAYBY_URL": system.url,
        "LAYBY_TOKEN": "op-token-0123456789abcdef",
        "LAYBY_NATS_URL": system.settings.nats_url or "",
        "LAYBY_NAMESPACE": system.settings.namespace,
        "INTERACTIONS_PUBLIC_BASE_URL": system.url,
    }.items():
        monkeypatch.setenv(key, value)
    media = json.dumps([{"kind": "link", "url": "https://docs.example/nda", "caption": "The NDA"}])
    run = asyncio.create_task(
        asyncio.to_thread(
            cli.main,
            [
                "ask",
                "Sign it",
                "--format",
                "external",
                "--link",
                "https://sign.example/?cb={callback_url}",
                "--media",
                media,
                "--timeout",
                "30",
            ],
        )
    )
    _, callback = await callback_of(system, "Sign it")
    async with system.http() as http:
        [item] = (await http.get("/api/interactions")).json()["data"]["items"]
    assert item["media"] == [{"kind": "link", "url": "https://docs.example/nda", "caption": "The NDA"}]
    async with httpx.AsyncClient() as http:
        assert (await http.post(callback, json={"signed": "yes"})).status_code == 200
    assert await asyncio.wait_for(run, 15) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1]) == {"signed": "yes"}


async def test_an_expired_ticket_is_the_same_404_as_an_unknown_one(
    settings: Settings, store: Any, db: Any
) -> None:
    """The ticket lives for the question's budget (docs/aggregates/interaction.md#ticket-lifetime): once that passed on the door's clock,
    the callback is refused exactly like an unknown ticket, even before the sweeper prunes."""
    from datetime import UTC, datetime

    from layby_domain.clock import ManualClock
    from tests.conftest import start_system, stop_system

    clock = ManualClock(datetime.now(UTC))
    system = await start_system(settings, clock)
    try:
        c = await system.sdk(public_base_url=system.url)
        ask = asyncio.create_task(
            c.ask_user(
                "Expiring", answer_format="external", link="https://x.example/?cb={callback_url}", timeout=600
            )
        )
        _, callback = await callback_of(system, "Expiring")
        base = callback.rsplit("/", 1)[0]
        clock.advance(601)
        async with httpx.AsyncClient() as http:
            expired = await http.post(callback, json={"late": True})
            unknown = await http.post(f"{base}/{'Z' * 43}", json={"late": True})
            expired_get = await http.get(callback)
        assert expired.status_code == unknown.status_code == 404
        assert expired.content == unknown.content
        assert expired_get.content == b"Not Found"
        ask.cancel()
    finally:
        await stop_system(system)


async def test_a_callback_that_beats_the_ask_to_the_door_waits_for_it_and_is_not_lost(
    system: System, client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ADR 0010: the ticket is bound before the link is built, so a provider that calls back
    while the asker is still recording the question gets its 200, not a 404 it may never retry."""
    from layby_services.door.routes import callback as callback_door

    early: list[asyncio.Task[httpx.Response]] = []
    waiting = asyncio.Event()  # the door (in this process) waits for a question not recorded yet
    await_ask = callback_door._await_ask

    async def noted(*args: Any) -> Any:
        waiting.set()
        return await await_ask(*args)

    monkeypatch.setattr(callback_door, "_await_ask", noted)

    async def instant_provider(callback_url: str) -> str:
        async def call_back() -> httpx.Response:
            async with httpx.AsyncClient() as http:
                return await http.post(callback_url, json={"paid": True})

        early.append(asyncio.create_task(call_back()))
        # The provider answers the checkout request only once its callback waits at the door.
        await eventually(waiting.is_set, "the callback to wait at the door for its question")
        return "https://pay.example/cs_1"

    answer = await asyncio.wait_for(
        client.ask_user("Pay now", answer_format="external", link=instant_provider, timeout=30), 10
    )
    assert answer == {"paid": True}
    [resp] = [await t for t in early]
    assert resp.status_code == 200 and resp.json()["data"]["status"] == "answered"


async def test_a_bound_ticket_whose_question_never_lands_is_the_uniform_404_after_the_wait(
    system: System, client: Any
) -> None:
    """A link builder that fails leaves its bound ticket without a question: callbacks on it wait
    at most LAYBY_CALLBACK_ASK_WAIT_SECONDS and then get the uniform 404; nothing is recorded."""
    seen: list[str] = []

    def broken(callback_url: str) -> str:
        seen.append(callback_url)
        raise RuntimeError("the provider is down")

    with pytest.raises(RuntimeError, match="the provider is down"):
        await client.ask_user("Pay later", answer_format="external", link=broken, timeout=30)
    base = seen[0].rsplit("/", 1)[0]
    async with httpx.AsyncClient() as http:
        bound = await http.post(seen[0], json={"paid": True})
        unknown = await http.post(f"{base}/{'Q' * 43}", json={"paid": True})
        page = await http.get(seen[0])
    assert bound.status_code == unknown.status_code == 404 and bound.content == unknown.content
    assert page.status_code == 404 and page.content == b"Not Found"
    async with system.http() as http:
        assert (await http.get("/api/interactions")).json()["data"]["total"] == 0


async def test_a_resumed_run_never_builds_its_external_link_again(system: System, db: Any) -> None:
    """docs/aggregates/run.md#parking with docs/asking.md#links: the link builder creates an outside resource once per question;
    replaying the flow after the callback resumes it returns the recorded answer without
    running the builder again."""
    from datetime import UTC, datetime, timedelta

    import layby
    from tests.integration.test_parks import Workers, wait_status

    built: list[str] = []

    async def create_checkout(callback_url: str) -> str:
        built.append(callback_url)
        return f"https://pay.example/cs_{len(built)}"

    def register(w: layby.Worker) -> None:
        @w.flow("checkout")
        async def checkout(amount: int) -> dict[str, Any]:
            paid = await layby.ask_user(
                f"Pay {amount}",
                answer_format="external",
                link=create_checkout,
                mode="async",
                expiry_at=datetime.now(UTC) + timedelta(hours=1),
            )
            return {"paid": paid}

    workers = Workers(system)
    try:
        worker = await workers.new(register)
        await workers.serve(worker)
        run_id = await worker.start("checkout", 42)
        await wait_status(db, run_id, "parked")
        assert len(built) == 1
        ticket = built[0].rsplit("/", 1)[1]
        async with httpx.AsyncClient() as http:
            resp = await http.post(f"{system.url}/api/interactions/callback/{ticket}", json={"ok": 1})
        assert resp.status_code == 200
        row = await wait_status(db, run_id, "finished")
        assert json.loads(row["result"]) == {"paid": {"ok": 1}}
        assert len(built) == 1
    finally:
        await workers.stop_all()


async def test_a_ticket_reservation_is_refused_naming_the_field(system: System, client: Any) -> None:
    """The reserve command is checked like an ask: token, id, hash and deadline, each refusal
    naming its field; a hash bound to one question cannot be bound to another."""
    import msgspec

    from layby_contracts.commands import REPLY_DECODER, Refused, Reserved, ReserveTicket

    async def send(**fields: Any) -> Any:
        base: dict[str, Any] = {
            "token": "op-token-0123456789abcdef",
            "interaction_id": str(uuid.uuid4()),
            "ticket_hash": "a" * 64,
            "timeout": 30.0,
        }
        cmd = ReserveTicket(**{**base, **fields})
        msg = await client._nc.request(system.settings.names.cmd_ask, msgspec.json.encode(cmd), timeout=5)
        return REPLY_DECODER.decode(msg.data)

    cases = [
        ({"token": "nope"}, "token"),
        ({"interaction_id": "x"}, "interaction_id"),
        ({"ticket_hash": "zz"}, "ticket_hash"),
        ({"timeout": -1.0}, "timeout"),
        ({"mode": "async", "timeout": None}, "expiry_at"),
    ]
    for fields, where in cases:
        reply = await send(**fields)
        assert isinstance(reply, Refused) and reply.field == where, (fields, reply)
    first = str(uuid.uuid4())
    assert await send(interaction_id=first, ticket_hash="b" * 64) == Reserved()
    assert await send(interaction_id=first, ticket_hash="b" * 64) == Reserved()  # idempotent
    taken = await send(ticket_hash="b" * 64)
    assert isinstance(taken, Refused) and taken.field == "ticket_hash"
    assert taken.message == "ticket_hash is already in use"


async def test_only_a_runs_own_identity_may_bind_a_ticket_to_its_park(system: System) -> None:
    """A park's interaction id is derived from its run (guessable by anyone who learns the run
    id): a restricted identity may not bind a ticket to another identity's park."""
    from datetime import UTC, datetime, timedelta

    import msgspec

    from layby_contracts.commands import REPLY_DECODER, Refused, Reserved, ReserveTicket
    from layby_domain.validation import call_interaction_id
    from tests.conftest import ALICE, BOB

    bob = await system.sdk(BOB)
    run_id = await bob.start_run("payroll")

    async def reserve(token: str, digest: str) -> Any:
        cmd = ReserveTicket(
            token=token,
            interaction_id=call_interaction_id(run_id, 0),
            ticket_hash=digest,
            mode="async",
            expiry_at=datetime.now(UTC) + timedelta(hours=1),
            run_id=run_id,
            call=0,
        )
        msg = await bob._nc.request(system.settings.names.cmd_ask, msgspec.json.encode(cmd), timeout=5)
        return REPLY_DECODER.decode(msg.data)

    stolen = await reserve(ALICE, "c" * 64)
    assert isinstance(stolen, Refused) and stolen.kind == "audience"
    assert await reserve(BOB, "d" * 64) == Reserved()
    unbound = await reserve(BOB, "e" * 64)  # a different hash for the same park is fine: its own
    assert unbound == Reserved()
