"""bench/compare.py's result files, run order and table
(docs/performance.md#before-and-after-in-one-run-benchcomparepy)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

pytestmark = pytest.mark.unit

BENCH = Path(__file__).resolve().parents[2] / "bench"


def _load(name: str) -> ModuleType:
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    path = list(sys.path)
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path[:] = path  # compare.py puts bench/ first on the path for its own imports
    return module


result = _load("_result")
compare = _load("compare")


def _result(bench: str, **values: float) -> Any:
    out = result.Result(bench)
    for name, value in values.items():
        if name.startswith("rate"):
            out.higher(name, value)
        else:
            out.lower(name, value)
    return out


def test_a_written_result_reads_back_with_each_figure_in_order(tmp_path: Path) -> None:
    """What a bench writes with --json is what compare.py reads: names, values and direction, in order."""
    out = result.Result("sync_cycle")
    out.higher("N=10 cycles/s", 612.5)
    out.lower("N=10 ask→add p99, ms", 17.25)
    out.write(str(tmp_path / "r.json"))

    back = result.parse_result((tmp_path / "r.json").read_text(encoding="utf-8"))

    assert back.bench == "sync_cycle"
    assert [(m.name, m.value, m.better) for m in back.metrics] == [
        ("N=10 cycles/s", 612.5, "higher"),
        ("N=10 ask→add p99, ms", 17.25, "lower"),
    ]


def test_a_figure_that_could_not_be_measured_is_null_not_nan(tmp_path: Path) -> None:
    """NaN (no server CPU when the bench ran against a given URL) is written as JSON null."""
    out = result.Result("sync_cycle")
    out.lower("N=1 server CPU per cycle, ms", float("nan"))
    out.write(str(tmp_path / "r.json"))

    text = (tmp_path / "r.json").read_text(encoding="utf-8")

    assert "NaN" not in text
    assert result.parse_result(text).metrics[0].value is None


def test_without_json_path_nothing_is_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A bench run without --json writes no file."""
    monkeypatch.chdir(tmp_path)
    result.Result("parks").write(None)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("text", "error", "message"),
    [
        ("[]", TypeError, "a bench result needs an object with a 'metrics' list"),
        ('{"metrics": [{"value": 1}]}', TypeError, "a metric needs a 'name': {'value': 1}"),
        (
            '{"metrics": [{"name": "x", "value": 1, "better": "more"}]}',
            ValueError,
            "metric 'x': 'better' must be 'higher' or 'lower'",
        ),
        (
            '{"metrics": [{"name": "x", "value": "fast", "better": "higher"}]}',
            TypeError,
            "metric 'x': 'value' must be a number or null",
        ),
    ],
)
def test_a_malformed_result_is_refused_naming_what_is_wrong(
    text: str, error: type[Exception], message: str
) -> None:
    """A result file compare.py cannot trust is refused with a message naming the field."""
    with pytest.raises(error) as caught:
        result.parse_result(text)
    assert str(caught.value) == message


def test_rounds_alternate_and_reverse_so_drift_favours_neither_side() -> None:
    """Round 1 runs before then after, round 2 after then before, and so on."""
    assert compare.run_order(3) == [
        (0, "before"),
        (0, "after"),
        (1, "after"),
        (1, "before"),
        (2, "before"),
        (2, "after"),
    ]


def test_the_table_shows_every_round_the_medians_and_after_over_before() -> None:
    """Each metric gets its rounds side by side, the median of each side and after/before of the medians."""
    before = [_result("s", rate=100.0, p99=20.0), _result("s", rate=110.0, p99=22.0)]
    after = [_result("s", rate=120.0, p99=15.0), _result("s", rate=130.0, p99=17.0)]

    lines = compare.table(before, after).splitlines()

    assert lines[0] == (
        "| metric | better | before 1 | after 1 | before 2 | after 2 "
        "| median before | median after | after/before |"
    )
    assert lines[1] == "|---|---|---:|---:|---:|---:|---:|---:|---:|"
    assert lines[2] == "| rate | higher | 100 | 120 | 110 | 130 | 105 | 125 | 1.19 |"
    assert lines[3] == "| p99 | lower | 20.0 | 15.0 | 22.0 | 17.0 | 21.0 | 16.0 | 0.76 |"


def test_a_figure_missing_on_one_side_shows_na_and_no_ratio() -> None:
    """A metric only one side reports (a bench of the ref without it, an unmeasured value) has no ratio."""
    before = [_result("s", rate=100.0)]
    after = [_result("s", rate=100.0, p50=2.5)]
    after[0].lower("cpu", float("nan"))

    lines = compare.table(before, after).splitlines()

    assert lines[2] == "| rate | higher | 100 | 100 | 100 | 100 | 1.00 |"
    assert lines[3] == "| p50 | lower | n/a | 2.50 | n/a | 2.50 | n/a |"
    assert lines[4] == "| cpu | lower | n/a | n/a | n/a | n/a | n/a |"
