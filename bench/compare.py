"""Before and after in one run: a bench against a git ref's build and the working tree's.

    python bench/compare.py REF [--rounds 3] [--bench sync_cycle] [--bench-from worktree|each]
                            [--client each|worktree] [-- bench args...]

Builds REF (any commit-ish) once into bench/.compare/<sha>/ (its files from `git archive`, a venv
with `pip install -e '.[embedded]' psutil`) and reuses that build afterwards. Then runs the bench
``--rounds`` times on each side, alternating and reversing the order every round (before, after,
after, before, ...) so a machine that drifts during the run favours neither side. Every run is its
own process that starts its own `layby up`: the ref's build for "before", a venv of the working
tree made the same way (bench/.compare/worktree/, editable) for "after". The bench script is the
working tree's for both sides unless ``--bench-from each``, so the way of measuring is the same
and only the system under test differs. ``--client each`` (default) runs the bench client with
the side's own interpreter (its SDK too: what a user of that version gets); ``--client worktree``
runs it with the working tree's for both and takes only `layby up` from the ref
(``BENCH_LAYBY_PYTHON``, bench/_up.py).

Prints a table: each metric's value in every round on both sides, the medians and after/before.
See docs/performance.md#before-and-after-in-one-run-benchcomparepy.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
from _result import Metric, Result, parse_result

CACHE = HERE / ".compare"
SIDES = ("before", "after")


def git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=True).stdout


def resolve(ref: str) -> str:
    try:
        return git("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}").strip()
    except subprocess.CalledProcessError:
        sys.exit(f"compare: {ref!r} names no commit in this repository")


def is_dirty() -> bool:
    """Uncommitted changes to tracked files, or untracked files that are not ignored."""
    return bool(git("status", "--porcelain").strip())


def venv_python(venv: Path) -> Path:
    return venv / "bin" / "python"


def make_venv(venv: Path, src: Path, log: Path) -> None:
    """A venv with ``src`` installed the way every side of a comparison is: editable, with the
    `embedded` extra and psutil (the benches measure memory and CPU with it), and nothing else, so
    both sides carry the same packages (what is installed can change what a process does, e.g.
    the plugins a library enables when it finds a package)."""
    pip = [str(venv_python(venv)), "-m", "pip", "install"]
    steps = [[sys.executable, "-m", "venv", str(venv)], [*pip, "-e", f"{src}[embedded]", "psutil"]]
    with log.open("a") as out:
        for step in steps:
            if subprocess.run(step, stdout=out, stderr=subprocess.STDOUT, check=False).returncode != 0:
                sys.exit(f"compare: building {venv} failed at {' '.join(step[:4])}…; see {log}")


def build_ref(sha: str, cache: Path) -> Path:
    """The ref's tree and venv under ``cache/<sha>``, built once; returns the tree's directory.

    A build that did not finish (no ``ready`` file) is thrown away and made again."""
    where = cache / sha
    if (where / "ready").exists():
        print(f"compare: reusing the build of {sha[:12]} in {where}", flush=True)
        return where
    shutil.rmtree(where, ignore_errors=True)
    (where / "src").mkdir(parents=True)
    log = where / "build.log"
    print(f"compare: building {sha[:12]} in {where} (log: {log})", flush=True)
    t0 = time.perf_counter()
    archive = subprocess.Popen(
        ["git", "-C", str(ROOT), "archive", "--format=tar", sha], stdout=subprocess.PIPE
    )
    assert archive.stdout is not None
    subprocess.run(["tar", "-x", "-C", str(where / "src")], stdin=archive.stdout, check=True)
    archive.stdout.close()
    if archive.wait() != 0:
        sys.exit(f"compare: git archive {sha} failed")
    make_venv(where / "venv", where / "src", log)
    (where / "ready").write_text(sha + "\n")
    print(f"compare: built {sha[:12]} in {time.perf_counter() - t0:.0f} s", flush=True)
    return where


def build_worktree(cache: Path) -> Path:
    """A venv of the working tree made like the ref's (editable, so it follows every edit);
    made again when pyproject.toml or the set of packages changes. Returns its interpreter."""
    where = cache / "worktree"
    # An editable install maps each top-level package it found; a new one needs a new install.
    packages = sorted(
        str(p.relative_to(ROOT))
        for d in ("libs/layby", "libs", "contracts", "services")  # pyproject's package folders
        for p in (ROOT / d).glob("*/__init__.py")
    )
    key = hashlib.sha256(
        "\n".join([str(ROOT), *packages]).encode() + (ROOT / "pyproject.toml").read_bytes()
    ).hexdigest()
    ready = where / "ready"
    if ready.exists() and ready.read_text().strip() == key:
        return venv_python(where / "venv")
    shutil.rmtree(where, ignore_errors=True)
    where.mkdir(parents=True)
    print(f"compare: building a venv of the working tree in {where}", flush=True)
    make_venv(where / "venv", ROOT, where / "build.log")
    ready.write_text(key + "\n")
    return venv_python(where / "venv")


def run_order(rounds: int) -> list[tuple[int, str]]:
    """(round, side) in the order they run: before/after, then after/before, and so on."""
    out: list[tuple[int, str]] = []
    for r in range(rounds):
        pair = SIDES if r % 2 == 0 else SIDES[::-1]
        out += [(r, side) for side in pair]
    return out


def fmt(value: float | None) -> str:
    if value is None:
        return "n/a"
    if abs(value) >= 100:
        return f"{value:.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def median(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def ratio(after: float | None, before: float | None) -> str:
    if after is None or before is None or before == 0:
        return "n/a"
    return f"{after / before:.2f}"


def table(before: list[Result], after: list[Result]) -> str:
    """A Markdown table: per metric, better-direction, every round's before and after, the
    medians and after/before of the medians. ``before[i]`` and ``after[i]`` are round i."""
    rounds = max(len(before), len(after))
    order: dict[str, Metric] = {}
    for res in [*after, *before]:
        for m in res.metrics:
            order.setdefault(m.name, m)

    def values(results: list[Result], name: str) -> list[float | None]:
        out: list[float | None] = []
        for res in results:
            found = [m.value for m in res.metrics if m.name == name]
            out.append(found[0] if found else None)
        return out + [None] * (rounds - len(out))

    head = ["metric", "better"]
    for r in range(1, rounds + 1):
        head += [f"before {r}", f"after {r}"]
    head += ["median before", "median after", "after/before"]
    lines = ["| " + " | ".join(head) + " |", "|---|---|" + "---:|" * (len(head) - 2)]
    for name, metric in order.items():
        b, a = values(before, name), values(after, name)
        cells = [name, metric.better]
        for r in range(rounds):
            cells += [fmt(b[r]), fmt(a[r])]
        mb, ma = median(b), median(a)
        cells += [fmt(mb), fmt(ma), ratio(ma, mb)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def tail(path: Path, lines: int = 30) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("ref", help="the commit-ish to compare against (main, HEAD~3, a sha)")
    parser.add_argument("--rounds", type=int, default=3, help="runs per side (default 3)")
    parser.add_argument("--bench", default="sync_cycle", help="a bench of bench/, without .py")
    parser.add_argument(
        "--bench-from",
        choices=("worktree", "each"),
        default="worktree",
        help="whose bench script runs: the working tree's for both sides (default), or each side's own",
    )
    parser.add_argument(
        "--client",
        choices=("each", "worktree"),
        default="each",
        help="interpreter of the bench process: each side's (default), or the working tree's for both",
    )
    parser.add_argument(
        "--python",
        help="the working tree's interpreter (default: a venv made like the ref's, under --cache)",
    )
    parser.add_argument("--cache", default=str(CACHE), help="where builds of refs are kept")
    argv = sys.argv[1:]
    cut = argv.index("--") if "--" in argv else len(argv)
    args = parser.parse_args(argv[:cut])
    bench_args = argv[cut + 1 :]
    if "--json" in bench_args:
        parser.error("--json is compare.py's to give")
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")

    sha = resolve(args.ref)
    head = resolve("HEAD")
    dirty = is_dirty()
    if args.python and not Path(args.python).exists():
        parser.error(f"--python {args.python} does not exist")
    cache = Path(args.cache).absolute()
    where = build_ref(sha, cache)
    # absolute, not resolved: a venv's python is a symlink that must keep its venv's name
    after_python = Path(args.python).absolute() if args.python else build_worktree(cache)
    python = {"before": venv_python(where / "venv"), "after": after_python}
    script_name = f"{args.bench}.py"
    script = {"before": HERE / script_name, "after": HERE / script_name}
    if args.bench_from == "each":
        script["before"] = where / "src" / "bench" / script_name
    for side, path in script.items():
        if not path.exists():
            sys.exit(f"compare: {path} does not exist ({side}); try --bench-from worktree")
        if "add_json_option" not in path.read_text():
            sys.exit(
                f"compare: {path} ({side}) has no --json to report its figures; use --bench-from worktree"
            )

    logs = cache / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    results: dict[str, list[Result]] = {"before": [], "after": []}
    with tempfile.TemporaryDirectory(prefix="layby-compare-") as tmp:
        for r, side in run_order(args.rounds):
            out = Path(tmp) / f"{r}-{side}.json"
            log = logs / f"{stamp}-{args.bench}-{r + 1}-{side}.log"
            client = python["after"] if args.client == "worktree" else python[side]
            env = {**os.environ, "BENCH_LAYBY_PYTHON": str(python[side])}
            cmd = [str(client), str(script[side]), *bench_args, "--json", str(out)]
            print(f"compare: round {r + 1} {side:<6} …", end=" ", flush=True)
            t0 = time.perf_counter()
            with log.open("w") as f:
                done = subprocess.run(
                    cmd, stdout=f, stderr=subprocess.STDOUT, cwd=script[side].parent, env=env, check=False
                )
            print(f"{time.perf_counter() - t0:.0f} s (log: {log})", flush=True)
            if done.returncode != 0:
                print(tail(log), file=sys.stderr)
                hint = " (try --client worktree)" if side == "before" and args.client == "each" else ""
                sys.exit(f"compare: the {side} run exited with {done.returncode}{hint}")
            results[side].append(parse_result(out.read_text()))

    whose = {"each": "each side's own", "worktree": "the working tree's"}
    print()
    print(f"before: {args.ref} = {sha}")
    print(f"after:  working tree at {head}{' + uncommitted changes (dirty)' if dirty else ''}")
    print(
        f"bench:  {script_name}, script: {whose[args.bench_from]}, client: {whose[args.client]};"
        f" {args.rounds} round(s), order alternating; bench args: {' '.join(bench_args) or 'none'}"
    )
    print()
    print(table(results["before"], results["after"]))


if __name__ == "__main__":
    main()
