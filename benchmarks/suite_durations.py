"""The test suite's time per tests/ directory, from pytest's JUnit XML, one run or a before/after pair.

    bash setup.sh test --junitxml=after.xml
    python benchmarks/suite_durations.py after.xml                # seconds per directory, and the wall
    python benchmarks/suite_durations.py before.xml after.xml     # the two side by side

A directory's figure is the sum of its tests' own durations (set-up and teardown included), so it says
where the suite spends its time; under pytest-xdist the tests overlap and the wall (the session's
duration, the `time` of the XML's testsuite) is what a CI job waits for. Also prints the longest tests.

Where the XML carries each test's CPU (the `cpu_s` property tests/conftest.py records: the worker's
whole process tree, set-up to teardown), it also prints CPU-seconds per directory and the costliest tests: the
suite is bound by CPU, so that is the figure that says what a cut would save.
"""

from __future__ import annotations

import argparse
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

CPU_PROPERTY = "cpu_s"  # tests/conftest.py's name for a test's CPU-seconds


@dataclass(frozen=True)
class SuiteTimes:
    wall_s: float
    tests: int
    per_dir: Counter[str]
    per_test: dict[str, float]
    cpu_per_dir: Counter[str]
    cpu_per_test: dict[str, float]


def read(path: Path) -> SuiteTimes:
    """Durations of one JUnit XML file; a file pytest did not write raises ValueError naming it."""
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError) as exc:
        raise ValueError(f"{path}: not a readable JUnit XML file ({exc})") from None
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    if suite is None:
        raise ValueError(f"{path}: no <testsuite> element")
    per_dir: Counter[str] = Counter()
    per_test: dict[str, float] = {}
    cpu_per_dir: Counter[str] = Counter()
    cpu_per_test: dict[str, float] = {}
    for case in suite.iter("testcase"):
        parts = (case.get("classname") or "").split(".")
        where = parts[1] if len(parts) > 2 and parts[0] == "tests" else "(top)"
        name = f"{'/'.join(parts)}.py::{case.get('name')}"
        seconds = float(case.get("time") or 0.0)
        per_dir[where] += seconds
        per_test[name] = seconds
        for prop in case.iter("property"):
            if prop.get("name") == CPU_PROPERTY:
                cpu_per_test[name] = float(prop.get("value") or 0.0)
                cpu_per_dir[where] += cpu_per_test[name]
    return SuiteTimes(float(suite.get("time") or 0.0), len(per_test), per_dir, per_test, cpu_per_dir, cpu_per_test)


def minutes(seconds: float) -> str:
    return f"{int(seconds // 60)} min {seconds % 60:02.0f} s"


def table(runs: list[tuple[str, SuiteTimes]]) -> str:
    dirs = sorted({d for _, r in runs for d in r.per_dir}, key=lambda d: -runs[-1][1].per_dir.get(d, 0.0))
    head = "| directory | " + " | ".join(f"{name}: test s" for name, _ in runs) + " |"
    rows = [head, "|---|" + "---:|" * len(runs)]
    for d in dirs:
        rows.append(f"| `tests/{d}` | " + " | ".join(f"{r.per_dir.get(d, 0.0):.0f}" for _, r in runs) + " |")
    rows.append("| sum of test durations | " + " | ".join(f"{sum(r.per_dir.values()):.0f}" for _, r in runs) + " |")
    rows.append("| **wall (pytest session)** | " + " | ".join(f"**{minutes(r.wall_s)}**" for _, r in runs) + " |")
    rows.append("| tests | " + " | ".join(str(r.tests) for _, r in runs) + " |")
    return "\n".join(rows)


def cpu_table(runs: list[tuple[str, SuiteTimes]]) -> str:
    """CPU-seconds per directory, for the runs that recorded it."""
    runs = [(name, r) for name, r in runs if r.cpu_per_test]
    dirs = sorted({d for _, r in runs for d in r.cpu_per_dir}, key=lambda d: -runs[-1][1].cpu_per_dir.get(d, 0.0))
    rows = ["| directory | " + " | ".join(f"{name}: CPU s" for name, _ in runs) + " |", "|---|" + "---:|" * len(runs)]
    for d in dirs:
        rows.append(f"| `tests/{d}` | " + " | ".join(f"{r.cpu_per_dir.get(d, 0.0):.0f}" for _, r in runs) + " |")
    totals = (sum(r.cpu_per_dir.values()) / 60 for _, r in runs)
    rows.append("| **CPU-minutes** | " + " | ".join(f"**{minutes:.1f}**" for minutes in totals) + " |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("junit", nargs="+", type=Path, help="pytest --junitxml files (first: before, last: after)")
    parser.add_argument("--longest", type=int, default=15, help="how many of the longest tests to list (default 15)")
    args = parser.parse_args(argv)
    try:
        runs = [(path.stem, read(path)) for path in args.junit]
    except ValueError as exc:
        print(f"suite_durations: {exc}", file=sys.stderr)
        return 2
    print(table(runs))
    last = runs[-1][1]
    print(f"\nlongest tests of {runs[-1][0]}:")
    for name, seconds in sorted(last.per_test.items(), key=lambda kv: -kv[1])[: args.longest]:
        print(f"{seconds:8.1f} s  {name}")
    if any(r.cpu_per_test for _, r in runs):
        print("\n" + cpu_table(runs))
        if last.cpu_per_test:
            print(f"\ncostliest tests of {runs[-1][0]} (CPU):")
            for name, seconds in sorted(last.cpu_per_test.items(), key=lambda kv: -kv[1])[: args.longest]:
                print(f"{seconds:8.1f} CPU s  {name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
