"""Health, readiness, the OpenAPI document, and errors that never leak internals (docs/doors/common.md#rules-every-door-shares)."""

from __future__ import annotations

import asyncio
import json
import re
from importlib import resources

import pytest

from tests.conftest import System

pytestmark = pytest.mark.integration


async def test_healthz_and_readyz(system: System) -> None:
    """/healthz answers while the process lives; /readyz checks NATS JetStream and PostgreSQL."""
    async with system.http(None) as http:
        assert (await http.get("/healthz")).json() == {"data": {"status": "ok"}}
        ready = await http.get("/readyz")
    assert ready.status_code == 200
    assert ready.json() == {"data": {"status": "ready", "nats": True, "postgres": True}}


async def test_the_door_sends_no_server_banner(system: System) -> None:
    """No response says what software serves it (no ``server`` header)."""
    async with system.http(None) as http:
        responses = [await http.get(path) for path in ("/healthz", "/api/interactions", "/nope")]
    assert all("server" not in r.headers for r in responses)


async def test_openapi_document_lists_the_doors(system: System) -> None:
    """The OpenAPI document, generated from the handlers, is served at /schema/openapi.json
    (docs/doors/common.md#the-openapi-document): every door, the bearer scheme on the
    authenticated ones, the doors' error envelope, and the list door's 200 is an object."""
    async with system.http(None) as http:
        resp = await http.get("/schema/openapi.json")
    assert resp.status_code == 200
    doc = resp.json()
    assert doc["openapi"].startswith("3.1")
    paths = doc["paths"]
    assert {
        "/api/interactions",
        "/api/interactions/stream",
        "/api/interactions/{interaction_id}/answer",
        "/api/interactions/media/{media_id}",
        "/api/interactions/callback/{ticket}",
        "/api/runs",
        "/api/runs/{run_id}",
        "/healthz",
        "/readyz",
    } <= set(paths)
    components = doc["components"]
    assert components["securitySchemes"]["bearerAuth"] == {
        "type": "http",
        "scheme": "bearer",
        "description": components["securitySchemes"]["bearerAuth"]["description"],
    }
    error = components["schemas"]["Error"]
    assert error["required"] == ["error"] and set(error["properties"]) == {"error", "field"}
    assert error["additionalProperties"] is False
    authenticated = [
        paths["/api/interactions"]["get"],
        paths["/api/interactions/stream"]["get"],
        paths["/api/interactions/{interaction_id}/answer"]["post"],
        paths["/api/runs"]["get"],
        paths["/api/runs/{run_id}"]["get"],
    ]
    for operation in authenticated:
        assert operation["security"] == [{"bearerAuth": []}]
        assert operation["responses"]["401"] == {"$ref": "#/components/responses/Unauthorized"}
    unauthorized = components["responses"]["Unauthorized"]
    assert unauthorized["headers"]["WWW-Authenticate"]["required"] is True
    assert (
        "missing bearer token"
        in unauthorized["content"]["application/json"]["schema"]["properties"]["error"]["enum"]
    )
    for public in ("/api/interactions/media/{media_id}", "/api/interactions/callback/{ticket}", "/healthz"):
        assert all(op["security"] == [] for op in paths[public].values())
    listed = paths["/api/interactions"]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
    page = components["schemas"][listed["$ref"].rpartition("/")[2]]
    assert page["type"] == "object" and page["required"] == ["data"]


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/api/interactions"),
        ("GET", "/api/interactions/stream"),
        ("POST", "/api/interactions/x/answer"),
    ],
)
async def test_every_authenticated_door_refuses_without_a_token(
    system: System, method: str, path: str
) -> None:
    """The three authenticated doors answer 401 without credentials (docs/doors/common.md#authentication)."""
    async with system.http(None) as http:
        resp = await http.request(method, path, json={"answer": 1})
    assert resp.status_code == 401
    assert resp.json() == {"error": "missing bearer token"}
    assert resp.headers["www-authenticate"].startswith("Bearer")


async def test_unknown_route_and_method_use_the_error_envelope(system: System) -> None:
    """Unknown routes and methods answer in the {"error": ...} envelope with no internals."""
    async with system.http() as http:
        missing = await http.get("/api/nope")
        wrong = await http.delete("/api/interactions")
    assert (missing.status_code, missing.json()) == (404, {"error": "not found"})
    assert (wrong.status_code, wrong.json()) == (405, {"error": "method not allowed"})


async def test_the_inbox_page_is_served_with_a_strict_csp_and_no_inline_script(system: System) -> None:
    """docs/doors/inbox-page.md#security-headers: `/` and `/inbox` serve the page; scripts only from the door, images from https:,
    data: and the door; nosniff everywhere; unknown static names are a plain 404."""
    async with system.http(None) as http:
        for path in ("/", "/inbox"):
            resp = await http.get(path)
            assert resp.status_code == 200
            assert resp.headers["content-type"].startswith("text/html")
            csp = resp.headers["content-security-policy"]
            assert "script-src 'self'" in csp and "img-src 'self' https: data:" in csp
            assert "default-src 'none'" in csp and "unsafe-inline" not in csp
            assert resp.headers["x-content-type-options"] == "nosniff"
            assert "<script>" not in resp.text  # the one script is an external module
            assert not re.search(r"\son[a-z]+=", resp.text)  # no inline event handlers
        js = await http.get("/static/inbox.js")
        assert js.status_code == 200 and js.headers["content-type"].startswith("text/javascript")
        assert "innerHTML" not in js.text and "eval(" not in js.text
        assert (await http.get("/static/../pyproject.toml")).status_code == 404
        assert (await http.get("/static/nope.js")).status_code == 404


async def test_every_module_of_the_page_is_served_as_javascript_and_revalidated_by_etag(
    system: System,
) -> None:
    """The page loads one entry module (docs/doors/inbox-page.md#routes-and-static-files); every
    module it imports, however deep — and so every module shipped — is served as JavaScript under
    the page's CSP, uses no innerHTML or eval, and is sent with no-cache and an ETag that answers
    an unchanged copy 304."""
    async with system.http(None) as http:
        page = (await http.get("/")).text
        entries = re.findall(r'<script type="module" src="/static/([\w.-]+)"></script>', page)
        assert entries == ["inbox.js"]
        seen: set[str] = set()
        todo = list(entries)
        while todo:
            name = todo.pop()
            if name in seen:
                continue
            seen.add(name)
            resp = await http.get(f"/static/{name}")
            assert resp.status_code == 200, name
            assert resp.headers["content-type"].startswith("text/javascript"), name
            assert resp.headers["cache-control"] == "no-cache"
            assert "script-src 'self'" in resp.headers["content-security-policy"]
            assert "innerHTML" not in resp.text and "eval(" not in resp.text, name
            again = await http.get(f"/static/{name}", headers={"If-None-Match": resp.headers["etag"]})
            assert again.status_code == 304 and again.content == b"", name
            todo += re.findall(r'^import (?:[^"]*from )?"\./([\w.-]+)";$', resp.text, re.MULTILINE)
        static = resources.files("layby_services.door") / "static"
        assert seen == {f.name for f in static.iterdir() if f.name.endswith(".js")}  # none left out
        css = await http.get("/static/inbox.css")
        assert css.status_code == 200 and css.headers["content-type"].startswith("text/css")


@pytest.mark.settings(rate_limits=True)
async def test_rate_limits_refuse_with_429_retry_after_and_no_store(system: System) -> None:
    """With LAYBY_RATE_LIMITS on, the 11th callback request from one address within 10 s is a 429
    with Retry-After and no-store; other doors and the health probes are not affected."""
    async with system.http(None) as http:
        first = [await http.get("/api/interactions/callback/" + "x" * 43) for _ in range(10)]
        refused = await http.get("/api/interactions/callback/" + "x" * 43)
        other = await http.get("/api/interactions/media/short")
        health = [await http.get("/healthz") for _ in range(30)]
    assert {r.status_code for r in first} == {404}
    assert refused.status_code == 429
    assert refused.json() == {"error": "too many requests"}
    assert 1 <= int(refused.headers["retry-after"]) <= 10
    assert refused.headers["cache-control"] == "no-store"
    assert other.status_code == 400
    assert {r.status_code for r in health} == {200}


async def test_rate_limits_are_off_by_default(system: System) -> None:
    """Without LAYBY_RATE_LIMITS nothing is throttled (local use and benchmarks)."""
    async with system.http(None) as http:
        statuses = {(await http.get("/api/interactions/callback/" + "x" * 43)).status_code for _ in range(15)}
    assert statuses == {404}


async def test_too_many_or_too_large_headers_are_431(system: System) -> None:
    """More than LAYBY_HTTP_MAX_HEADERS (100) header fields, or more than
    LAYBY_HTTP_MAX_HEADER_BYTES (16384) of them, is a 431 before any door runs."""
    many = {f"x-probe-{i}": "1" for i in range(150)}
    large = {"x-probe": "a" * 20_000}
    async with system.http(None) as http:
        too_many = await http.get("/healthz", headers=many)
        too_large = await http.get("/api/interactions", headers=large)
        fine = await http.get("/healthz", headers={f"x-probe-{i}": "1" for i in range(20)})
    for resp in (too_many, too_large):
        assert resp.status_code == 431
        assert resp.json() == {"error": "request header fields too large"}
        assert resp.headers["cache-control"] == "no-store"
    assert fine.status_code == 200


async def _raw(system: System, request: bytes, *, read_timeout: float = 10) -> tuple[bytes, float]:
    """Send raw bytes; return everything the door answers until it closes, and how long it took."""
    port = int(system.url.rsplit(":", 1)[1])
    loop = asyncio.get_running_loop()
    started = loop.time()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(request)
    await writer.drain()
    data = await asyncio.wait_for(reader.read(-1), read_timeout)
    writer.close()
    return data, loop.time() - started


def _json_error(raw: bytes) -> tuple[int, dict[str, str], object]:
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    headers = dict(line.lower().split(": ", 1) for line in lines[1:])
    return int(lines[0].split()[1]), headers, json.loads(body)


@pytest.mark.settings(http_header_timeout_seconds=0.5)
async def test_a_client_that_never_finishes_its_headers_gets_408_and_is_cut_off(system: System) -> None:
    """Slow-loris: a request head still incomplete after LAYBY_HTTP_HEADER_TIMEOUT_SECONDS gets 408."""
    raw, took = await _raw(system, b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: a")
    status, headers, body = _json_error(raw)
    assert (status, body) == (408, {"error": "request header timeout"})
    assert headers["connection"] == "close" and headers["cache-control"] == "no-store"
    assert took < 3
    silent, took = await _raw(system, b"")  # connects and sends nothing at all
    assert _json_error(silent)[0] == 408 and took < 3


@pytest.mark.settings(http_header_timeout_seconds=0.5)
async def test_the_header_timeout_never_cuts_a_request_that_is_being_served(system: System) -> None:
    """The timer covers the head only: a stream held open far longer than the timeout stays open."""
    port = int(system.url.rsplit(":", 1)[1])
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    from tests.conftest import OPERATOR

    writer.write(
        b"GET /api/interactions/stream HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
        + OPERATOR.encode()
        + b"\r\n\r\n"
    )
    await writer.drain()
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
    assert head.startswith(b"HTTP/1.1 200")
    await asyncio.sleep(1.5)  # a time window on purpose: three header timeouts pass while it is served
    assert not reader.at_eof()
    writer.close()


async def test_an_oversized_query_string_is_the_json_413(system: System) -> None:
    query = "a=" + "x" * 70_000
    raw, _ = await _raw(
        system, f"GET /api/interactions/callback/{'t' * 43}?{query} HTTP/1.1\r\nHost: x\r\n\r\n".encode()
    )
    status, headers, body = _json_error(raw)
    assert (status, body) == (413, {"error": "payload too large"})
    assert headers["content-type"] == "application/json"


async def test_a_request_the_parser_cannot_read_is_a_json_400(system: System) -> None:
    raw, _ = await _raw(system, b"GARBAGE\x00 / HTTP/1.1\r\n\r\n")
    status, headers, body = _json_error(raw)
    assert (status, body) == (400, {"error": "invalid HTTP request"})
    assert headers["x-content-type-options"] == "nosniff"


async def test_an_encoded_slash_in_an_id_gets_the_doors_own_answer(system: System) -> None:
    """docs/doors/common.md#encoded-slashes: the door that owns the path answers, in its own order."""
    async with system.http() as http:
        run = await http.get("/api/runs/a%2Fb")
        assert (run.status_code, run.json()) == (404, {"error": "Run not found"})
        cancel = await http.post("/api/runs/a%2Fb/cancel")
        assert (cancel.status_code, cancel.json()) == (404, {"error": "Run not found"})
        answer = await http.post("/api/interactions/a%2Fb/answer", json={"answer": 1})
        assert (answer.status_code, answer.json()) == (404, {"error": "Interaction not found"})
        bad_body = await http.post("/api/interactions/a%2Fb/answer", content=b"{")
        assert bad_body.status_code == 400  # the body is checked before the id
    async with system.http(None) as anon:
        media = await anon.get("/api/interactions/media/%2F")
        assert (media.status_code, media.json()) == (400, {"error": "invalid media id"})
        ticket = await anon.get("/api/interactions/callback/a%2Fb")
        assert ticket.status_code == 404 and ticket.text == "Not Found"
        assert ticket.headers["content-type"].startswith("text/plain")
        unauthenticated = await anon.get("/api/runs/a%2Fb")
        assert unauthenticated.status_code == 401


@pytest.mark.parametrize("path", ["/api/runs", "/api/runs/summary"])
async def test_a_nul_character_in_a_query_parameter_is_a_400_naming_it(system: System, path: str) -> None:
    """Every query parameter is checked by its declared type before it reaches the database: a NUL
    character (which PostgreSQL cannot store) is a 400 naming the parameter, as on the list door
    (docs/doors/common.md#envelope-and-errors)."""
    async with system.http() as http:
        resp = await http.get(path, params={"flow": "a\x00b"})
    assert resp.status_code == 400
    assert resp.json() == {"error": "flow must not contain NUL characters", "field": "flow"}
    assert resp.headers["cache-control"] == "no-store"


@pytest.mark.parametrize(
    ("method", "path", "allowed"),
    [
        ("TRACE", "/api/runs", {"GET"}),
        ("DELETE", "/api/interactions", {"GET"}),
        ("PUT", "/api/interactions/callback/" + "t" * 43, {"GET", "POST"}),
        ("GET", "/api/runs/" + "0" * 36 + "/cancel", {"POST"}),
    ],
)
async def test_a_405_names_the_methods_the_path_allows(
    system: System, method: str, path: str, allowed: set[str]
) -> None:
    """A wrong method is a 405 in the error envelope with the ``Allow`` header RFC 9110 requires,
    listing the path's methods (docs/doors/common.md#envelope-and-errors)."""
    async with system.http() as http:
        resp = await http.request(method, path)
    assert (resp.status_code, resp.json()) == (405, {"error": "method not allowed"})
    listed = {m.strip() for m in resp.headers["allow"].split(",")}
    assert allowed <= listed
    assert resp.headers["cache-control"] == "no-store"


async def test_options_allows_every_documented_method(system: System) -> None:
    """An ``OPTIONS`` request's ``Allow`` lists every method the OpenAPI document gives its path
    (docs/doors/common.md#the-openapi-document)."""
    async with system.http(None) as http:
        doc = (await http.get("/schema/openapi.json")).json()
        for template, operations in doc["paths"].items():
            path = re.sub(r"\{[^}]+\}", "t" * 43, template)
            resp = await http.options(path)
            assert resp.status_code == 204, (path, resp.status_code)
            listed = {m.strip() for m in resp.headers["allow"].split(",")}
            assert {m.upper() for m in operations} <= listed, (path, listed)


async def test_a_query_value_is_its_text_never_read_as_null(system: System) -> None:
    """A query parameter's value is its text: ``status=null`` is a status that does not exist
    (400), never "no status" (docs/doors/runs.md)."""
    async with system.http() as http:
        resp = await http.get("/api/runs", params={"status": "null"})
    assert resp.status_code == 400
    assert resp.json() == {
        "error": "status must be one of running, parked, resumed, finished, failed, cancelled",
        "field": "status",
    }
