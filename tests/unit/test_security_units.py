"""Sealing sensitive answers and deriving NATS identities (docs/security.md)."""

from __future__ import annotations

import pytest

from layby.natskeys import client_inbox, client_seed, key_id, public_key
from layby.settings import SettingsError, load_client_settings
from layby_contracts.errors import Permanent
from layby_contracts.subjects import Names
from layby_server.operations.natsauth import (
    new_seed,
    render_authorization,
    service_permissions,
    token_entries,
    token_permissions,
)
from layby_server.settings import load_settings
from layby_server.store.memstore import MemoryEventStore
from layby_server.store.sealing import Sealer, SealError, new_key, parse_keys
from layby_server.store.streams import stream_names


def test_a_sealed_answer_opens_only_for_its_own_subject() -> None:
    sealer = Sealer(new_key())
    sealed = sealer.seal(b'"4711"', bound_to="layby.secret.a.r")
    assert b"4711" not in sealed
    assert sealer.open(sealed, bound_to="layby.secret.a.r") == b'"4711"'
    with pytest.raises(SealError, match="another question"):
        sealer.open(sealed, bound_to="layby.secret.b.r")


def test_a_tampered_sealed_answer_does_not_open() -> None:
    sealer = Sealer(new_key())
    sealed = bytearray(sealer.seal(b"secret", bound_to="s"))
    sealed[-1] ^= 1
    with pytest.raises(SealError):
        sealer.open(bytes(sealed), bound_to="s")
    with pytest.raises(SealError, match="not a sealed value"):
        sealer.open(b"secret", bound_to="s")


def test_a_rotated_key_still_opens_what_the_old_key_sealed() -> None:
    old, new = new_key(), new_key()
    sealed_before = Sealer(old).seal(b"x", bound_to="s")
    rotated = Sealer(f"{new},{old}")
    assert rotated.open(sealed_before, bound_to="s") == b"x"
    sealed_after = rotated.seal(b"y", bound_to="s")
    assert Sealer(new).open(sealed_after, bound_to="s") == b"y"
    with pytest.raises(SealError, match="not configured"):
        Sealer(old).open(sealed_after, bound_to="s")


def test_a_malformed_secrets_key_names_the_variable_and_never_echoes_the_key() -> None:
    with pytest.raises(SettingsError, match="LAYBY_SECRETS_KEY key 2 must be 32 random bytes") as err:
        parse_keys("LAYBY_SECRETS_KEY", f"{new_key()},not-a-key-abc")
    assert "not-a-key-abc" not in str(err.value)
    assert load_settings({"LAYBY_SECRETS_KEY": new_key()}).secrets_key


async def test_a_store_without_a_secrets_key_keeps_no_sensitive_answer() -> None:
    store = MemoryEventStore()
    store.sealer = None
    with pytest.raises(Permanent, match="LAYBY_SECRETS_KEY is not set"):
        await store.put_secret("i", "r", b'"x"')


async def test_the_in_memory_store_keeps_sensitive_answers_sealed_too() -> None:
    store = MemoryEventStore()
    await store.put_secret("i", "r", b'"4711"')
    raw = store._get(store.names.secrets_stream, store.names.secret("i", "r"))
    assert raw is not None and b"4711" not in raw.data
    assert await store.get_secret("i", "r") == b'"4711"'


def test_a_token_is_its_own_nats_key_and_the_key_reveals_nothing_of_it() -> None:
    token = "alice-token-0123456789abcd"
    seed = client_seed(token)
    assert seed.startswith("SU") and len(seed) == 58
    assert client_seed(token) == seed  # the same token, the same key, on every machine
    assert client_seed(token + "x") != seed
    assert public_key(seed).startswith("U")
    assert token not in seed and token not in public_key(seed)
    assert client_inbox(token) == f"_INBOX.{key_id(token)}"
    assert key_id(token) != key_id("bob-token-0123456789abcdef")


def test_a_nats_seed_setting_is_checked_without_echoing_it() -> None:
    with pytest.raises(SettingsError, match="LAYBY_NATS_SEED must be a NATS user seed") as err:
        load_client_settings({"LAYBY_NATS_SEED": "SUnot-a-seed"})
    assert "SUnot-a-seed" not in str(err.value)
    seed = new_seed()
    assert load_client_settings({"LAYBY_NATS_SEED": seed}).nats_seed == seed


def test_a_user_token_may_only_send_commands_and_read_its_own_inbox_and_wakes() -> None:
    n = Names("layby")
    (alice,) = token_entries("alice-token-0123456789abcd:alice:user")
    perms = token_permissions(alice, n)
    assert perms["publish"] == {
        "allow": ["layby.cmd.ask", "layby.cmd.prune", "layby.cmd.run", "layby.cmd.door", "layby.cmd.notify"]
    }
    kid = key_id(alice.token)
    assert perms["subscribe"] == {"allow": [f"_INBOX.{kid}.>", f"layby.wake.{kid}.>"]}


def test_an_operator_token_also_pulls_continuations_and_nothing_else_of_jetstream() -> None:
    n = Names("layby")
    (ops,) = token_entries("op-token-0123456789abcdef:ops:operator")
    publish = token_permissions(ops, n)["publish"]["allow"]  # type: ignore[index]
    jetstream = [s for s in publish if s.startswith("$JS")]
    assert jetstream == ["$JS.API.CONSUMER.MSG.NEXT.LAYBY_CONTINUATIONS.*", "$JS.ACK.LAYBY_CONTINUATIONS.>"]


def test_only_the_ask_service_serves_commands_and_no_service_deletes_a_stream() -> None:
    """No service may delete or purge a stream; only the admin key (``layby restore``) deletes,
    and only Layby's own streams (docs/security.md#nats-authorization)."""
    n = Names("layby")
    for role in ("door", "delivery", "resume", "sweeper", "admin"):
        perms = service_permissions(role, n)
        assert "layby.cmd.>" not in perms["subscribe"]["allow"]  # type: ignore[index]
        # Each service answers the doctor's ping (docs/operations.md#layby-doctor); admin answers nothing.
        assert perms["allow_responses"] is (role != "admin")
    ask = service_permissions("ask", n)
    assert "layby.cmd.>" in ask["subscribe"]["allow"]  # type: ignore[index]
    for role in ("ask", "door", "delivery", "resume", "sweeper"):
        allowed = service_permissions(role, n)["publish"]["allow"]  # type: ignore[index]
        assert not [s for s in allowed if "DELETE" in s or "PURGE" in s or s.startswith("$JS.API.STREAM.*")]
    admin = service_permissions("admin", n)["publish"]["allow"]  # type: ignore[index]
    deletes = sorted(s for s in admin if "DELETE" in s or "PURGE" in s)
    assert deletes == sorted(
        [f"$JS.API.STREAM.DELETE.{s}" for s in stream_names(n)]
        + ["$JS.API.STREAM.MSG.DELETE.LAYBY_CONTINUATIONS"]
    )
    assert "layby.wake.>" in service_permissions("resume", n)["publish"]["allow"]  # type: ignore[index]
    assert "layby.wake.>" not in service_permissions("door", n)["publish"]["allow"]  # type: ignore[index]


def test_the_authorization_block_holds_public_keys_only() -> None:
    token = "op-token-0123456789abcdef"
    seed = new_seed()
    text = render_authorization(
        Names("layby"), {"ask": public_key(seed)}, token_entries(f"{token}:ops:operator")
    )
    assert public_key(seed) in text and public_key(client_seed(token)) in text
    assert seed not in text and token not in text and client_seed(token) not in text


def test_only_the_services_that_hand_sealed_answers_to_their_waiter_read_them() -> None:
    n = Names("layby")
    readers = {
        role
        for role in ("ask", "door", "delivery", "resume", "sweeper", "admin")
        if "$JS.API.DIRECT.GET.LAYBY_SECRETS.>" in service_permissions(role, n)["publish"]["allow"]  # type: ignore[index]
    }
    assert readers == {"ask", "resume"}
    assert "layby.secret.>" in service_permissions("door", n)["publish"]["allow"]  # type: ignore[index]
