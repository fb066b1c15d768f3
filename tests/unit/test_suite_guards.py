"""The test suite's own guards (tests/conftest.py): one broken fixture fails one test."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]

CANCELLED_ONCE = """
import asyncio

import pytest

started = 0


@pytest.fixture
async def service():
    global started
    started += 1
    if started == 1:
        raise asyncio.CancelledError
    yield started


async def test_first(service): pass
async def test_second(service): pass
async def test_third(service): pass
"""


def test_a_fixture_whose_setup_is_cancelled_fails_only_the_test_that_met_it(tmp_path: Path) -> None:
    (tmp_path / "test_cancelled.py").write_text(CANCELLED_ONCE)
    (tmp_path / "pytest.ini").write_text(
        "[pytest]\nasyncio_mode = auto\nasyncio_default_fixture_loop_scope = session\n"
        "asyncio_default_test_loop_scope = session\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "libs" / "layby")])}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "tests.conftest",
            "-p",
            "no:xdist",
            "-p",
            "no:cacheprovider",
            "test_cancelled.py",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    out = done.stdout + done.stderr
    assert "2 passed, 1 error" in out, out
    assert "the setup of fixture 'service' ended with CancelledError()" in out, out
