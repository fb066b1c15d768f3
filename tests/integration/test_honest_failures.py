"""Failures surface as what they are: an unreachable NATS is an error naming the variable and
the address, an ask that cannot be served raises InteractionTimeoutError within its budget, and
a service stops on SIGTERM even while it is still connecting (docs/errors.md#connection-failures)."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time

import pytest

from layby.sdk import connect
from layby_contracts.errors import InteractionTimeoutError, Unavailable
from layby_server.operations.embedded import free_port
from layby_server.settings import Settings
from tests.conftest import OPERATOR

pytestmark = pytest.mark.integration


async def test_an_unreachable_nats_is_unavailable_naming_the_variable_and_address(settings: Settings) -> None:
    """connect() to a closed port fails at once with Unavailable naming LAYBY_NATS_URL and the
    address, never a retry loop."""
    url = f"nats://127.0.0.1:{free_port()}"
    started = time.monotonic()
    with pytest.raises(Unavailable) as caught:
        await connect(nats_url=url, token=OPERATOR, settings=settings)
    assert time.monotonic() - started < 6
    assert f"cannot reach NATS at {url} (LAYBY_NATS_URL)" in str(caught.value)


async def test_an_ask_with_no_ask_service_times_out_within_its_budget(settings: Settings) -> None:
    """With NATS up and no ask service, ask_user(timeout=T) keeps trying within T and then raises
    InteractionTimeoutError — not Unavailable at once, not a raw transport error, not at T+10s."""
    client = await connect(nats_url=settings.nats_url, token=OPERATOR, settings=settings)
    try:
        started = time.monotonic()
        with pytest.raises(InteractionTimeoutError) as caught:
            await client.ask_user("Anyone?", timeout=1.0)
        elapsed = time.monotonic() - started
    finally:
        await client.close()
    assert 1.0 <= elapsed < 2.6, elapsed
    assert "could not be reached to withdraw the question" in str(caught.value)


@pytest.mark.e2e
async def test_a_service_still_connecting_stops_on_sigterm(settings: Settings) -> None:
    """A service whose NATS is unreachable keeps trying (one log line per kind of error, no
    tracebacks) and exits cleanly as soon as it is asked to stop."""
    env = dict(os.environ)
    env.update(
        LAYBY_NATS_URL=f"nats://127.0.0.1:{free_port()}",
        LAYBY_DATABASE_URL=str(settings.database_url),
        LAYBY_NAMESPACE=settings.namespace,
        LAYBY_LOG_FORMAT="json",
    )
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "layby.cli",
        "serve",
        "sweeper",
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    assert proc.stdout is not None
    try:
        # It is connecting once it has said it cannot reach NATS (the first attempt's one line).
        first = await asyncio.wait_for(proc.stdout.readline(), 20)
        assert b"nats.connection_error" in first, first
        proc.send_signal(signal.SIGTERM)
        code = await asyncio.wait_for(proc.wait(), 10)
        output = first.decode() + (await proc.stdout.read()).decode()
    finally:
        if proc.returncode is None:
            proc.kill()
    assert code == 0, output
    assert "Traceback" not in output, output
    assert output.count("nats.connection_error") == 1, output
    assert "LAYBY_NATS_URL" in output


async def test_several_nats_urls_separated_by_commas_connect_to_the_one_that_answers(
    settings: Settings, nats_server: tuple[str, object]
) -> None:
    """A cluster's seeds are named as one comma-separated value (docs/reliability.md#naming-a-cluster):
    the client tries each, so a first seed that is down does not stop it from connecting."""
    down = f"nats://127.0.0.1:{free_port()}"
    client = await connect(nats_url=f"{down}, {settings.nats_url}", token=OPERATOR, settings=settings)
    await client.close()


async def test_a_failed_first_connect_to_several_servers_names_every_address_and_the_reason(
    settings: Settings,
) -> None:
    """With every seed down the error names each address and why, never a TypeError; a service
    (no first-connect budget) reports the same way when a URL cannot even be read."""
    from layby.connection import connect_nats

    urls = [f"nats://127.0.0.1:{free_port()}" for _ in range(3)]
    with pytest.raises(Unavailable) as caught:
        await connect(nats_url=",".join(urls), token=OPERATOR, settings=settings)
    message = str(caught.value)
    assert f"cannot reach NATS at {', '.join(urls)} (LAYBY_NATS_URL): " in message
    assert "Error" in message.split("(LAYBY_NATS_URL): ")[1], message
    with pytest.raises(Unavailable) as caught:
        await connect_nats(f"{urls[0]},,{urls[1]}", name="t")
    assert "LAYBY_NATS_URL is not a usable NATS URL" in str(caught.value)
    assert "empty entry" in str(caught.value)
    with pytest.raises(Unavailable) as caught:
        await connect_nats("nats://127.0.0.1:notaport", name="t")
    assert "cannot reach NATS at nats://127.0.0.1:notaport (LAYBY_NATS_URL): " in str(caught.value)
