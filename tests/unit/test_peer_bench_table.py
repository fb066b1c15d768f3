"""The peer benchmarks' table puts each peer beside Layby at the same N, as ratios, and merges
rounds by their medians (docs/performance.md#peers-side-by-side-benchpeers). Pure formatting:
none of the peers is needed."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

pytestmark = pytest.mark.unit

TABLE = Path(__file__).resolve().parents[2] / "bench" / "peers" / "_table.py"


def _table() -> ModuleType:
    spec = importlib.util.spec_from_file_location("peers_table", TABLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _point(n: int, rate: float, p99: float, cpu: float, **extra: Any) -> dict[str, Any]:
    return {
        "n": n,
        "rate": rate,
        "cycles": int(rate * 10),
        "failures": 0,
        "seconds": 10.0,
        "seen_p50": 1.0,
        "seen_p99": 2.0,
        "resume_p50": 1.5,
        "resume_p99": p99,
        "system_cpu_ms": cpu,
        "client_cpu_ms": 0.0,
        **extra,
    }


def _row(table: str, system: str, n: int) -> list[str]:
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if cells[0] == system and cells[1] == str(n):
            return cells
    raise AssertionError(f"no row for {system} at N={n}:\n{table}")


def test_each_peer_is_a_ratio_to_layby_at_the_same_n() -> None:
    """cycles/s, answer→resume p99 and total CPU per cycle are each divided by Layby's at that N."""
    t = _table()
    table = t.render(
        [
            {"system": "Layby", "points": [_point(1, 200, 5.0, 4.0), _point(100, 400, 40.0, 2.0)]},
            {"system": "Temporal", "points": [_point(1, 20, 50.0, 20.0), _point(100, 100, 400.0, 8.0)]},
        ]
    )

    def ratios(system: str, n: int) -> list[str]:
        cells = _row(table, system, n)[-3:]
        assert all(c.endswith(t.TIMES) for c in cells), cells  # the multiplication sign
        return [c.removesuffix(t.TIMES) for c in cells]

    assert ratios("Layby", 1) == ["1.00", "1.00", "1.00"]
    assert ratios("Temporal", 1) == ["0.10", "10", "5.00"]
    assert ratios("Temporal", 100) == ["0.25", "10", "4.00"]


def test_without_layby_the_ratios_are_dashes_and_a_missing_peer_says_how_to_install_it() -> None:
    """No baseline, no ratio; a peer that is not installed is a row naming what to run."""
    t = _table()
    table = t.render(
        [
            {"system": "Restate", "points": [_point(1, 150, 6.0, 5.0)]},
            {"system": "LangGraph", "missing": "not installed (pip install -e '.[bench]')", "points": []},
        ]
    )
    assert _row(table, "Restate", 1)[-3:] == ["—", "—", "—"]
    assert "| LangGraph | — | not installed (pip install -e '.[bench]') |" in table


def test_rounds_merge_into_medians_with_cycles_summed() -> None:
    """Several rounds of one system at one N: each measure is the median, cycles add up."""
    t = _table()
    rounds = [
        [{"system": "Layby", "points": [_point(1, rate, p99, 3.0, system_cpu_by_process={"up": cpu})]}]
        for rate, p99, cpu in ((100, 9.0, 3.0), (300, 3.0, 1.0), (200, 5.0, 2.0))
    ]
    (merged,) = t.merge_rounds(rounds)
    (point,) = merged["points"]
    assert (point["rate"], point["resume_p99"], point["cycles"], point["rounds"]) == (200, 5.0, 6000, 3)
    assert point["system_cpu_by_process"] == {"up": 2.0}
