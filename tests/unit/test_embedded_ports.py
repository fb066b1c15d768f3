"""Ports for the servers Layby starts itself (docs/engineering.md#ports)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from layby_server.operations.embedded import LOWEST_PICKED_PORT, free_port

pytestmark = pytest.mark.unit


def _range(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "ip_local_port_range"
    path.write_text(text, encoding="ascii")
    return path


def test_a_free_port_lies_below_the_ephemeral_range_so_no_outgoing_connection_takes_it(
    tmp_path: Path,
) -> None:
    ephemeral = _range(tmp_path, "32768\t60999\n")
    ports = {free_port(ephemeral) for _ in range(50)}
    assert all(LOWEST_PICKED_PORT <= port < 32768 for port in ports)
    assert len(ports) > 40, "picked at random, so processes picking at once rarely pick alike"


def test_a_free_port_is_never_one_something_is_bound_to(tmp_path: Path) -> None:
    """With room for a thousand ports and most of them held, the held ones are never picked."""
    held: list[socket.socket] = []
    try:
        for port in range(LOWEST_PICKED_PORT, LOWEST_PICKED_PORT + 1000, 10):
            for p in range(port, port + 9):  # nine of every ten
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                try:
                    s.bind(("127.0.0.1", p))
                except OSError:
                    s.close()
                    continue
                held.append(s)
        taken = {s.getsockname()[1] for s in held}
        assert len(taken) > 800
        ephemeral = _range(tmp_path, f"{LOWEST_PICKED_PORT + 1000} 60999")
        for _ in range(20):
            picked = free_port(ephemeral)
            assert picked not in taken
            assert picked < LOWEST_PICKED_PORT + 1000
    finally:
        for s in held:
            s.close()


@pytest.mark.parametrize("text", ["", "not a range", "12000 60999"], ids=["empty", "garbage", "no-room"])
def test_without_a_readable_range_or_room_below_it_the_kernel_picks(tmp_path: Path, text: str) -> None:
    port = free_port(_range(tmp_path, text))
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", port))  # free: it binds
