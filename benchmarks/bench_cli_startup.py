"""`kchaos` start-up: wall and CPU time of commands that do little beyond starting (printed figures, not a test).

python benchmarks/bench_cli_startup.py [--runs 10] [--write-docs]

`--write-docs` rewrites the tables it owns in docs/figures.md (`cli-startup`, `speed-cli`).

Each command runs as a fresh process, as a user types it. The baseline is the same interpreter importing
every command's module (what `kchaos --help` did before commands were imported lazily); the ratio is
measured in the same run. Target (issue 16): `kchaos --help` and `kchaos admin ... --list` <= 0.3 s.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import time

from harness import docs_tables
from harness.cli import ALSO_IMPORT, COMMANDS

TARGET_S = 0.3
KCHAOS = [sys.executable, "-m", "harness"]
COMMANDS_TO_TIME: dict[str, list[str]] = {
    "kchaos --help": ["--help"],
    "kchaos admin topics --help": ["admin", "topics", "--help"],
    "kchaos run --help": ["run", "--help"],
    "kchaos check --help": ["check", "--help"],
    "kchaos bugs --list": ["bugs", "--list"],
    "kchaos nemeses": ["nemeses"],
}
EAGER_MODULES = [*ALSO_IMPORT.get("check", ()), *(spec.module for spec in COMMANDS.values())]
EAGER = "import importlib\n" + "".join(f"importlib.import_module({m!r})\n" for m in EAGER_MODULES)


def timed(argv: list[str]) -> tuple[float, float]:
    """Wall and CPU (user + system) seconds of one run of `argv`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)}: exit {proc.returncode}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def median_of(argv: list[str], runs: int) -> tuple[float, float]:
    timed(argv)  # warm the page cache
    samples = [timed(argv) for _ in range(runs)]
    return statistics.median(s[0] for s in samples), statistics.median(s[1] for s in samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    docs_tables.add_option(parser, "the start-up table and the CLI row of the speed table")
    args = parser.parse_args()
    eager_wall, eager_cpu = median_of([sys.executable, "-c", EAGER], args.runs)
    print(f"{'command':32} {'wall s':>8} {'cpu s':>8} {'vs eager':>9}  target <= {TARGET_S} s")
    print(f"{'(every command module imported)':32} {eager_wall:8.3f} {eager_cpu:8.3f} {'1.00':>9}")
    walls: dict[str, float] = {}
    for label, argv in COMMANDS_TO_TIME.items():
        wall, cpu = median_of([*KCHAOS, *argv], args.runs)
        walls[label] = wall
        verdict = "ok" if wall <= TARGET_S else "over"
        print(f"{label:32} {wall:8.3f} {cpu:8.3f} {wall / eager_wall:9.2f}  {verdict}")
    if args.write_docs:
        rows = [[f"`{label}`", f"{wall:.3f} s", f"{wall / eager_wall:.2f}"] for label, wall in walls.items()]
        header = ["command", f"wall (median of {args.runs})", f"vs importing every command ({eager_wall:.2f} s)"]
        docs_tables.write_table("cli-startup", docs_tables.table(header, rows))
        quick = ("kchaos --help", "kchaos admin topics --help")
        speed = [
            "`kchaos --help`, `kchaos admin topics --help` (`bench_cli_startup.py`)",
            "1.5\u20131.8 s",
            ", ".join(f"{walls[q]:.3f} s" for q in quick),
            f"≤ {TARGET_S} s",
            "yes" if all(walls[q] <= TARGET_S for q in quick) else "no",
        ]
        docs_tables.write_table("speed-cli", docs_tables.table(docs_tables.SPEED_HEADER, [speed]))


if __name__ == "__main__":
    main()
