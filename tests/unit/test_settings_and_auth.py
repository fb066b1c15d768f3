"""Settings load once, fail naming the variable; tokens and the audience clamp (docs/asking.md#audience-clamp, docs/engineering.md#settings)."""

from __future__ import annotations

import pytest

from layby_contracts.errors import CrossIdentityAudienceError, Unauthorized
from layby_server.auth import Authenticator, Principal, clamp_audience
from layby_server.settings import SettingsError, load_settings

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    "url", ["https://layby.example.com", "http://localhost:8000", "http://127.0.0.1", "http://[::1]:8000"]
)
def test_public_base_url_accepts_https_and_loopback_http(url: str) -> None:
    """INTERACTIONS_PUBLIC_BASE_URL is https, or http on loopback hosts only (docs/doors/callback.md#callback-url)."""
    assert load_settings({"INTERACTIONS_PUBLIC_BASE_URL": url}).public_base_url == url.rstrip("/")


@pytest.mark.parametrize("url", ["http://layby.example.com", "ftp://x", "layby.example.com"])
def test_public_base_url_refuses_anything_else_at_settings_load(url: str) -> None:
    """Any other base URL fails when settings load, naming the variable (docs/doors/callback.md#callback-url)."""
    with pytest.raises(SettingsError, match="INTERACTIONS_PUBLIC_BASE_URL must be an https:// origin"):
        load_settings({"INTERACTIONS_PUBLIC_BASE_URL": url})


def test_max_concurrent_defaults_to_1000_and_none_means_unlimited() -> None:
    """INTERACTIONS_MAX_CONCURRENT defaults to 1000; unset/None is unlimited; set must be > 0 (docs/asking.md#concurrency-cap)."""
    assert load_settings({}).max_concurrent == 1000
    assert load_settings({"INTERACTIONS_MAX_CONCURRENT": "none"}).max_concurrent is None
    with pytest.raises(SettingsError, match="INTERACTIONS_MAX_CONCURRENT must be > 0"):
        load_settings({"INTERACTIONS_MAX_CONCURRENT": "0"})


def test_the_caller_cap_defaults_to_10000_and_parses_like_the_user_cap() -> None:
    """INTERACTIONS_MAX_CONCURRENT_CALLER defaults to 10000, is read like INTERACTIONS_MAX_CONCURRENT and is
    independent of it (docs/caller-asks.md#the-concurrency-cap)."""
    assert load_settings({}).max_concurrent_caller == 10000
    assert load_settings({"INTERACTIONS_MAX_CONCURRENT_CALLER": "25"}).max_concurrent_caller == 25
    for unlimited in ("none", "unlimited", ""):
        assert load_settings({"INTERACTIONS_MAX_CONCURRENT_CALLER": unlimited}).max_concurrent_caller is None
    only_user = load_settings({"INTERACTIONS_MAX_CONCURRENT": "3"})
    assert (only_user.max_concurrent, only_user.max_concurrent_caller) == (3, 10000)
    with pytest.raises(SettingsError, match=r"^INTERACTIONS_MAX_CONCURRENT_CALLER must be > 0, got '0'$"):
        load_settings({"INTERACTIONS_MAX_CONCURRENT_CALLER": "0"})
    with pytest.raises(
        SettingsError, match=r"^INTERACTIONS_MAX_CONCURRENT_CALLER must be an integer, got 'many'$"
    ):
        load_settings({"INTERACTIONS_MAX_CONCURRENT_CALLER": "many"})


@pytest.mark.parametrize(
    ("raw", "seconds"), [("604800", 604800.0), ("7d", 604800.0), ("12h", 43200.0), ("90m", 5400.0)]
)
def test_waiting_outcome_retention_is_seconds_or_a_duration(raw: str, seconds: float) -> None:
    """LAYBY_WAITING_OUTCOME_RETENTION takes seconds or a duration, as LAYBY_CHECKPOINT_RETENTION does
    (docs/caller-asks.md#the-concurrency-cap)."""
    assert load_settings({}).waiting_outcome_retention_seconds == 7 * 86400.0
    assert (
        load_settings({"LAYBY_WAITING_OUTCOME_RETENTION": raw}).waiting_outcome_retention_seconds == seconds
    )


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("forever", "must be seconds or a duration such as 7d, 12h, 90m; got 'forever'"),
        ("2w", "must be seconds or a duration such as 7d, 12h, 90m; got '2w'"),
        ("0", "must be > 0, got '0'"),
        ("-1d", "must be > 0, got '-1d'"),
    ],
)
def test_waiting_outcome_retention_is_finite_and_positive(raw: str, message: str) -> None:
    """A waiting outcome nobody takes is dropped some day: no 'forever', nothing <= 0; the error names
    the variable (docs/caller-asks.md#the-concurrency-cap)."""
    with pytest.raises(SettingsError) as caught:
        load_settings({"LAYBY_WAITING_OUTCOME_RETENTION": raw})
    assert str(caught.value) == f"LAYBY_WAITING_OUTCOME_RETENTION {message}"


def test_invalid_numbers_fail_naming_the_variable() -> None:
    """Every invalid value fails at start-up naming its variable (docs/engineering.md#settings)."""
    with pytest.raises(SettingsError, match="INTERACTIONS_ANSWER_TIMEOUT_SECONDS must be a number"):
        load_settings({"INTERACTIONS_ANSWER_TIMEOUT_SECONDS": "soon"})
    with pytest.raises(SettingsError, match="LAYBY_HTTP_PORT must be a port number"):
        load_settings({"LAYBY_HTTP_PORT": "70000"})


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("tok", "entry 1 must be TOKEN:IDENTITY:ROLE"),
        ("0123456789abcdefX:me:admin", "ROLE must be operator or user"),
        ("short:me:user", "TOKEN must be at least 16 characters"),
        (" , ", "holds no TOKEN:IDENTITY:ROLE entry"),
    ],
)
def test_malformed_api_tokens_fail_at_load(raw: str, message: str) -> None:
    """LAYBY_API_TOKENS is TOKEN:IDENTITY:ROLE, ROLE operator or user; anything else fails at load."""
    with pytest.raises(SettingsError, match=message):
        load_settings({"LAYBY_API_TOKENS": raw})


def test_tokens_resolve_to_their_identity_and_role() -> None:
    """A configured token maps to its identity; unknown and missing tokens are refused."""
    auth = Authenticator("0123456789abcdefAA:ops:operator,0123456789abcdefBB:alice:user")
    assert auth.from_header("Bearer 0123456789abcdefBB") == Principal("alice", "user")
    assert not auth.from_header("bearer 0123456789abcdefAA").restricted
    with pytest.raises(Unauthorized):
        auth.from_header("Bearer nope")
    with pytest.raises(Unauthorized):
        auth.from_header(None)
    with pytest.raises(Unauthorized):
        auth.from_header("Basic 0123456789abcdefAA")


def test_restricted_callers_unset_audience_becomes_their_own_id() -> None:
    """Audience clamp on write: a restricted caller's unset audience becomes its own id (docs/asking.md#audience-clamp)."""
    assert clamp_audience(Principal("alice", "user"), None) == "alice"
    assert clamp_audience(Principal("alice", "user"), "alice") == "alice"


def test_restricted_caller_addressing_another_identity_is_denied() -> None:
    """Any other identity raises CrossIdentityAudienceError (docs/asking.md#audience-clamp)."""
    with pytest.raises(CrossIdentityAudienceError):
        clamp_audience(Principal("alice", "user"), "bob")


def test_unrestricted_callers_pass_through_unchanged() -> None:
    """Unrestricted callers' audience passes through unchanged (docs/asking.md#audience-clamp)."""
    assert clamp_audience(Principal("ops", "operator"), None) is None
    assert clamp_audience(Principal("ops", "operator"), "bob") == "bob"


def test_retention_settings_default_and_parse_like_the_checkpoint_retention() -> None:
    """The log and tickets are kept forever unless bounded; resolved rows are kept 30 days (gone
    caller asks 7), and each takes seconds, a duration or 'forever' (docs/operations.md#retention)."""
    defaults = load_settings({})
    assert (defaults.events_max_age_seconds, defaults.events_max_bytes, defaults.tickets_max_age_seconds) == (
        None,
        None,
        None,
    )
    assert (
        defaults.resolved_retention_seconds,
        defaults.run_retention_seconds,
        defaults.gone_entry_retention_seconds,
    ) == (30 * 86400.0, 30 * 86400.0, 7 * 86400.0)
    assert defaults.explicit == frozenset()
    set_ = load_settings(
        {
            "LAYBY_RESOLVED_RETENTION": "12h",
            "LAYBY_RUN_RETENTION": "forever",
            "LAYBY_GONE_ENTRY_RETENTION": "90m",
            "LAYBY_EVENTS_MAX_BYTES": "1000000000",
        }
    )
    assert (
        set_.resolved_retention_seconds,
        set_.run_retention_seconds,
        set_.gone_entry_retention_seconds,
    ) == (
        43200.0,
        None,
        5400.0,
    )
    assert set_.events_max_bytes == 1_000_000_000
    assert "LAYBY_EVENTS_MAX_BYTES" in set_.explicit
    with pytest.raises(SettingsError) as caught:
        load_settings({"LAYBY_RUN_RETENTION": "soon"})
    assert str(caught.value) == (
        "LAYBY_RUN_RETENTION must be seconds or a duration such as 30d, 12h, 90m; or 'forever'; got 'soon'"
    )
    with pytest.raises(SettingsError, match=r"^LAYBY_EVENTS_MAX_BYTES must be > 0, got '0'$"):
        load_settings({"LAYBY_EVENTS_MAX_BYTES": "0"})


def test_a_bounded_log_must_outlast_every_live_wait() -> None:
    """A bounded event log or ticket stream needs a finite checkpoint retention and must exceed the
    longest live wait by a day; otherwise the services refuse to start, naming both variables
    (docs/operations.md#a-bounded-log)."""
    with pytest.raises(SettingsError) as caught:
        load_settings({"LAYBY_EVENTS_MAX_AGE": "400d"})
    assert str(caught.value) == (
        "LAYBY_EVENTS_MAX_AGE needs LAYBY_CHECKPOINT_RETENTION: with parks kept forever a parked run "
        "would lose its events after 3.456e+07s"
    )
    with pytest.raises(SettingsError) as caught:
        load_settings({"LAYBY_TICKETS_MAX_AGE": "30d", "LAYBY_CHECKPOINT_RETENTION": "30d"})
    assert str(caught.value) == (
        "LAYBY_TICKETS_MAX_AGE (2.592e+06s) must exceed LAYBY_CHECKPOINT_RETENTION (2.592e+06s) by at "
        "least a day (2.6784e+06s): live questions and parks would lose their events"
    )
    ok = load_settings({"LAYBY_EVENTS_MAX_AGE": "400d", "LAYBY_CHECKPOINT_RETENTION": "365d"})
    assert ok.events_max_age_seconds == 400 * 86400.0
    assert ok.explicit == frozenset({"LAYBY_EVENTS_MAX_AGE", "LAYBY_CHECKPOINT_RETENTION"})
