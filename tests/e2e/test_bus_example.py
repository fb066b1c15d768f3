"""A service in another language asking on the bus (examples/node-bus, docs/bus.md): Node, the
official `nats` package, its own NATS key derived from its token, every message checked against
the checked-in JSON Schema, against a real `layby up`."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from layby.natskeys import client_seed, key_id, public_key
from layby_server.operations.busdoc import SCHEMA_DIR
from layby_server.operations.embedded import free_port
from tests.e2e.test_processes import _service, cli, spawn_up, stop_up, up_env
from tests.helpers import eventually_sync
from tests.node.projects import BUS_EXAMPLE, installed

pytestmark = pytest.mark.e2e

OPERATOR = "bus-example-operator-0123456789"
SERVICE = "bus-example-deploy-bot-0123456789"
SELECT_YES_NO = ("--format", "select", "--option", "yes", "--option", "no")
TOKENS = f"{OPERATOR}:ops:operator,{SERVICE}:deploy-bot:user"


def node(env: dict[str, str], *args: str, token: str = SERVICE) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [shutil.which("node") or "node", "ask.mjs", *args],
        cwd=BUS_EXAMPLE,
        env={**env, "LAYBY_TOKEN": token},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_the_node_service_derives_the_same_nats_key_as_the_sdk() -> None:
    """The derivation docs/bus.md describes, reproduced in Node, gives the key `layby nats-config`
    writes for the token (and its key id)."""
    installed(BUS_EXAMPLE)
    done = node(dict(os.environ), "--identity")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"public_key": public_key(client_seed(SERVICE)), "kid": key_id(SERVICE)}


def test_the_bus_documents_read_as_valid_asyncapi_and_json_schema_in_node(tmp_path: Path) -> None:
    """Read by another language's tools: asyncapi.json is valid against the official AsyncAPI 3
    schema and every reference in it resolves; the JSON Schema documents compile under Ajv. A
    broken document is refused naming the problem."""
    installed(BUS_EXAMPLE)
    ok = _check_contract(SCHEMA_DIR)
    assert ok.returncode == 0, ok.stderr
    assert "valid AsyncAPI 3.0.0" in ok.stdout

    broken = tmp_path / "schema"
    shutil.copytree(SCHEMA_DIR, broken)
    doc = json.loads((broken / "asyncapi.json").read_text(encoding="utf-8"))
    doc["channels"]["cmdAsk"]["messages"]["cmd.ask.v1"]["payload"]["$ref"] = (
        "commands.schema.json#/$defs/Gone"
    )
    doc["operations"][next(iter(doc["operations"]))]["action"] = "push"
    (broken / "asyncapi.json").write_text(json.dumps(doc), encoding="utf-8")
    refused = _check_contract(broken)
    assert refused.returncode == 1
    assert "commands.schema.json#/$defs/Gone resolves to nothing" in refused.stderr
    assert "asyncapi.json/operations/" in refused.stderr


def _questions(ops: dict[str, str], text: str) -> list[dict[str, Any]]:
    """The pending questions asked with ``text``."""
    items = json.loads(cli(ops, "interactions", "list", "--json").stdout)["items"]
    return [q for q in items if q["question"] == text]


def _asked_and_answered(
    bus_env: dict[str, str], ops: dict[str, str], text: str, answer: str, *args: str
) -> tuple[dict[str, Any], Any]:
    """The Node service asks ``text`` (``args``: more of ask.mjs's options); once the question is
    listed, and listed once, the Python CLI answers it. The question as listed, and the wake the
    service printed."""
    asking = subprocess.Popen(
        [shutil.which("node") or "node", "ask.mjs", text, *args, "--timeout", "60"],
        cwd=BUS_EXAMPLE,
        env={**bus_env, "LAYBY_TOKEN": SERVICE},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        listed = eventually_sync(lambda: _questions(ops, text), f"{text!r} listed", timeout=60)
        assert len(listed) == 1
        cli(ops, "interactions", "answer", listed[0]["interaction_id"], "--answer", answer)
        out, err = asking.communicate(timeout=60)
        assert asking.returncode == 0, err
        return listed[0], json.loads(out)
    finally:
        if asking.poll() is None:
            asking.kill()
            asking.communicate()


def _check_contract(schema_dir: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [shutil.which("node") or "node", "check-contract.mjs"],
        cwd=BUS_EXAMPLE,
        env={**os.environ, "LAYBY_SCHEMA_DIR": str(schema_dir)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.timeout(300)
def test_a_node_service_asks_on_the_bus_with_its_own_key(tmp_path: Path) -> None:
    """Ask → answered from the Python CLI → the Node service's outcome; a refusal names its field;
    a command that does not match the schema is never sent; a deadline withdraws the question; an
    unknown token's key is refused by NATS."""
    installed(BUS_EXAMPLE)
    env = up_env(tmp_path / "data", free_port(), LAYBY_LOG_LEVEL="warning", LAYBY_API_TOKENS=TOKENS)
    up = spawn_up(env)
    assert up.stdout is not None
    for line in up.stdout:  # with LAYBY_API_TOKENS set, it prints no token of its own
        if "Press Ctrl-C" in line:
            break
    try:
        runtime = json.loads((tmp_path / "data" / "runtime.json").read_text())
        bus_env = {**env, "LAYBY_NATS_URL": runtime["nats_url"]}
        ops = {**env, "LAYBY_TOKEN": OPERATOR}

        question, wake = _asked_and_answered(bus_env, ops, "Deploy v2?", '"yes"', *SELECT_YES_NO)
        assert (question["answer_format"], question["audience"]) == ("select", "deploy-bot")
        assert (wake["outcome"], wake["answer"], wake["answered_by"]) == ("answered", "yes", "ops")

        # The ask service killed: the service's ask finds nobody listening and sends the same
        # command again until `layby up` has restarted it; the question is recorded once.
        (victim,) = _service(up.pid, "ask")
        os.kill(victim, signal.SIGKILL)
        _, wake = _asked_and_answered(bus_env, ops, "While the ask service restarts", '"ok"')
        assert wake["answer"] == "ok"

        refused = node(bus_env, "Pick one", "--format", "select")
        assert refused.returncode == 2, refused.stderr
        assert json.loads(refused.stderr)["refused"]["field"] == "options"

        malformed = node(bus_env, "Never sent", "--timeout", "soon")
        assert malformed.returncode == 4, malformed.stderr
        assert "does not match the bus contract" in malformed.stderr
        assert "/timeout" in malformed.stderr

        expired = node(bus_env, "Nobody is there", "--timeout", "1")
        assert expired.returncode == 3, expired.stderr
        assert json.loads(expired.stderr) == {"no_answer": "timeout"}

        stranger = node(bus_env, "Who am I?", token="not-a-layby-token-0123456789")
        assert stranger.returncode == 1
        assert "NATS refused this token's key" in stranger.stderr

        questions = [
            q["question"] for q in json.loads(cli(ops, "interactions", "list", "--json").stdout)["items"]
        ]
        assert "Never sent" not in questions, "a command that failed the schema was not sent"
        assert "Pick one" not in questions and "Nobody is there" not in questions
    finally:
        stop_up(up)
