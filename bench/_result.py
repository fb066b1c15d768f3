"""A benchmark's key figures as a small JSON file, for `bench/compare.py`.

A bench that takes ``--json PATH`` writes ``{"bench": NAME, "metrics": [{"name", "value",
"better"}, ...]}`` there: one entry per figure in the order it prints them, ``better`` saying
which way is an improvement ("higher" for rates, "lower" for latencies, CPU and memory), and
``null`` for a figure it could not measure.
See docs/performance.md#before-and-after-in-one-run-benchcomparepy.
"""

from __future__ import annotations

import argparse
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

Better = Literal["higher", "lower"]


@dataclass(frozen=True)
class Metric:
    name: str
    value: float | None
    better: Better


@dataclass
class Result:
    bench: str
    metrics: list[Metric] = field(default_factory=list)

    def higher(self, name: str, value: float) -> None:
        """A figure where more is better (cycles/s, answers/s)."""
        self.metrics.append(Metric(name, _finite(value), "higher"))

    def lower(self, name: str, value: float) -> None:
        """A figure where less is better (latency, CPU, memory)."""
        self.metrics.append(Metric(name, _finite(value), "lower"))

    def write(self, path: str | None) -> None:
        """Write to ``path`` (nothing when the bench ran without --json)."""
        if not path:
            return
        body = {
            "bench": self.bench,
            "metrics": [{"name": m.name, "value": m.value, "better": m.better} for m in self.metrics],
        }
        Path(path).write_text(json.dumps(body, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")


def add_json_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", metavar="PATH", help="also write the key figures to PATH as JSON")


def parse_result(text: str) -> Result:
    """A result file's text back as a Result; a malformed one raises TypeError or ValueError
    naming what is wrong."""
    body = json.loads(text)
    if not isinstance(body, dict) or not isinstance(body.get("metrics"), list):
        raise TypeError("a bench result needs an object with a 'metrics' list")
    out = Result(str(body.get("bench", "")))
    for m in body["metrics"]:
        if not isinstance(m, dict) or not isinstance(m.get("name"), str):
            raise TypeError(f"a metric needs a 'name': {m!r}")
        if m.get("better") not in ("higher", "lower"):
            raise ValueError(f"metric {m['name']!r}: 'better' must be 'higher' or 'lower'")
        value = m.get("value")
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise TypeError(f"metric {m['name']!r}: 'value' must be a number or null")
        out.metrics.append(Metric(m["name"], None if value is None else float(value), m["better"]))
    return out


def _finite(value: float) -> float | None:
    return None if value is None or math.isnan(value) or math.isinf(value) else float(value)
