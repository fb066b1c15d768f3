"""The repository's Node projects (the TypeScript client, the bus example), installed for tests.

Node and npm come from the machine (Debian's packages, the npm registry). Without them a test
skips, except in CI, which must have them (see .ci/run).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TYPESCRIPT_CLIENT = ROOT / "clients" / "typescript"
BUS_EXAMPLE = ROOT / "examples" / "node-bus"


def npm() -> str:
    """The machine's npm (with its Node), or skip (fail in CI)."""
    found = shutil.which("npm")
    if found is None or shutil.which("node") is None:
        if os.environ.get("CI"):
            pytest.fail("CI must have Node.js and npm for the TypeScript tests (see .ci/run)")
        pytest.skip("no node/npm on this machine: `apt-get install nodejs npm`")
    return found


def installed(project: Path) -> str:
    """npm, after `npm ci` in ``project`` when its node_modules is missing or older than its lock
    file: the exact versions package-lock.json records."""
    exe = npm()
    marker = project / "node_modules" / ".package-lock.json"
    lock = project / "package-lock.json"
    if not marker.exists() or marker.stat().st_mtime < lock.stat().st_mtime:
        done = subprocess.run(
            [exe, "ci", "--no-audit", "--no-fund", "--loglevel=error"],
            cwd=project,
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, f"npm ci in {project}:\n{done.stdout}\n{done.stderr}"
    return exe


def run(project: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 300) -> None:
    """`npm <args>` in ``project``; its whole output on failure."""
    exe = installed(project)
    done = subprocess.run(
        [exe, *args], cwd=project, env=env, capture_output=True, text=True, check=False, timeout=timeout
    )
    assert done.returncode == 0, f"npm {' '.join(args)} in {project.name}:\n{done.stdout}\n{done.stderr}"
