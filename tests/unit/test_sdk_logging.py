"""The SDK logs like a library: standard ``logging`` records under ``layby``, nothing configured
for the application, routine events at debug; the programs Layby runs render them with their own
output (docs/engineering.md#logging)."""

from __future__ import annotations

import io
import json
import logging
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog

from layby.logs import get_logger
from layby.logsetup import configure_logging
from tests.helpers import Records

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import json, logging, structlog
root = list(logging.getLogger().handlers)
import layby, layby.sdk, layby.worker, layby.connection, layby.steps, layby.runs, layby.external
from layby.logs import get_logger
for name in ("layby.sdk", "layby.worker", "layby.connection"):
    log = get_logger(name)
    log.debug("probe.routine", n=1)
    log.info("probe.info", n=2)
get_logger("layby.sdk").warning("probe.warning", error="no way", n=3)
sdk = logging.getLogger("layby")
print(json.dumps({
    "root_unchanged": logging.getLogger().handlers == root,
    "root_level": logging.getLevelName(logging.getLogger().level),
    "layby_handlers": len(sdk.handlers),
    "layby_level": sdk.level,
    "propagate": sdk.propagate,
    "structlog_configured": structlog.is_configured(),
}))
"""


def test_importing_and_using_the_sdk_configures_nothing() -> None:
    """Importing the SDK and logging through its loggers adds no handler (to the root logger or
    to ``layby``), sets no level and leaves structlog unconfigured; an application that configures
    nothing sees only warnings and errors, through Python's own last-resort handler."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert json.loads(done.stdout) == {
        "root_unchanged": True,
        "root_level": "WARNING",
        "layby_handlers": 0,
        "layby_level": logging.NOTSET,
        "propagate": True,
        "structlog_configured": False,
    }
    assert done.stderr == "probe.warning error='no way' n=3\n"


@pytest.fixture
def sdk_logger() -> Iterator[logging.Logger]:
    """The ``layby`` logger at debug for one test; its handlers, level and propagation restored
    afterwards, and structlog's configuration too (the programs' set-up changes both)."""
    sdk = logging.getLogger("layby")
    saved = (list(sdk.handlers), sdk.level, sdk.propagate, structlog.get_config())
    sdk.setLevel(logging.DEBUG)
    try:
        yield sdk
    finally:
        sdk.handlers[:] = saved[0]
        sdk.setLevel(saved[1])
        sdk.propagate = saved[2]
        structlog.configure(**saved[3])


def test_a_line_is_readable_text_with_its_fields_as_attributes(sdk_logger: logging.Logger) -> None:
    """A line reads ``event key=value ...`` (strings with spaces quoted); each field is also an
    attribute of the record, renamed with a trailing ``_`` where a record attribute has its name;
    the record names the caller's line, not the SDK's logging helper."""
    records = Records()
    sdk_logger.addHandler(records)
    get_logger("layby.sdk").debug("sdk.waiting", interaction_id="ix-1", timeout_at="2026-01-01T00:00:00Z")
    get_logger("layby.worker").warning("worker.retry", error="it broke", name="flows", pct="100%")
    waiting, retry = records.records
    assert (waiting.name, waiting.levelno) == ("layby.sdk", logging.DEBUG)
    assert waiting.getMessage() == "sdk.waiting interaction_id=ix-1 timeout_at=2026-01-01T00:00:00Z"
    assert waiting.__dict__["interaction_id"] == "ix-1"
    assert waiting.funcName == "test_a_line_is_readable_text_with_its_fields_as_attributes"
    assert retry.getMessage() == "worker.retry error='it broke' name=flows pct=100%"
    assert retry.__dict__["name_"] == "flows"
    assert retry.name == "layby.worker"


def test_an_application_on_structlog_gets_the_lines_through_its_stdlib_integration(
    sdk_logger: logging.Logger,
) -> None:
    """An application that renders standard ``logging`` records with structlog's
    ``ProcessorFormatter`` gets the SDK's lines with their fields as keys."""
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=[structlog.stdlib.add_log_level, structlog.stdlib.ExtraAdder()],
            processor=structlog.processors.JSONRenderer(),
        )
    )
    sdk_logger.addHandler(handler)
    get_logger("layby.connection").warning("nats.connection_error", error="refused", repeated=0)
    line = json.loads(out.getvalue())
    assert line["event"] == "nats.connection_error error=refused repeated=0"
    assert (line["level"], line["error"], line["repeated"]) == ("warning", "refused", 0)


def test_the_programs_output_shows_the_sdk_lines_at_their_level(
    sdk_logger: logging.Logger, capsys: pytest.CaptureFixture[str]
) -> None:
    """The ``layby`` command and the services write the SDK's lines like their own (the event
    name and its fields); an event the program shows counts as info, other debug lines stay out."""
    configure_logging("json", "info", shown=["sdk.waiting"])
    get_logger("layby.sdk").debug("sdk.waiting", interaction_id="ix-2", timeout_at="soon")
    get_logger("layby.worker").debug("run.finished", run_id="r")
    get_logger("layby.worker").warning("worker.retry", run_id="r", error="it broke")
    lines = [json.loads(line) for line in capsys.readouterr().err.splitlines()]
    assert [(line["event"], line["level"]) for line in lines] == [
        ("sdk.waiting", "info"),
        ("worker.retry", "warning"),
    ]
    assert lines[0]["interaction_id"] == "ix-2"
    assert lines[1]["error"] == "it broke"
    configure_logging("console", "warning", shown=["sdk.waiting"])
    get_logger("layby.sdk").debug("sdk.waiting", interaction_id="ix-3", timeout_at="soon")
    assert capsys.readouterr().err == ""
    assert [h.get_name() for h in sdk_logger.handlers].count("layby.output") == 1
