"""The repository's sources, copied for a build (building in place leaves files behind), and
builds the test run's worker processes share."""

from __future__ import annotations

import fcntl
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_SKIP = shutil.ignore_patterns("build", "*.egg-info", "__pycache__", ".venv", "node_modules")


def copy_sources(dest: Path) -> Path:
    """Copy what the server's wheel is built from into ``dest``; returns ``dest``."""
    for name in ("contracts", "libs", "services"):
        shutil.copytree(ROOT / name, dest / name, ignore=_SKIP)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, dest / name)
    return dest


def built_once(factory: pytest.TempPathFactory, name: str, build: Callable[[Path], None]) -> Path:
    """The folder ``name`` that ``build`` fills, built once per test run: under pytest-xdist the
    worker that asks first builds it in the workers' common temporary folder (this run's own) and
    the others wait for it and reuse it; in one process it is built in the session's folder."""
    base = factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    dest, built = root / name, root / f"{name}.built"
    with (root / f"{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not built.exists():
            shutil.rmtree(dest, ignore_errors=True)  # what a worker that failed left behind
            dest.mkdir()
            build(dest)
            built.touch()
    return dest
