"""The repository's sources, copied for a build (building in place leaves files behind)."""

from __future__ import annotations

import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_SKIP = shutil.ignore_patterns("build", "*.egg-info", "__pycache__", ".venv", "node_modules")


def copy_sources(dest: Path) -> Path:
    """Copy what the server's wheel is built from into ``dest``; returns ``dest``."""
    for name in ("contracts", "libs", "services"):
        shutil.copytree(ROOT / name, dest / name, ignore=_SKIP)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, dest / name)
    return dest
