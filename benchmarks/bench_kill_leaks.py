"""The full record of issue 24 part 7: SIGKILL `kchaos run` at ten moments per backend, `kchaos heal`,
and check the host is exactly as before. Prints one table row per run (the record in docs/trust/leaks.md).

    PYTHONPATH=. python benchmarks/bench_kill_leaks.py [--backend netns|docker|both] [--moment NAME ...]

Root only; runs one at a time (each is a real cluster). Exit status 1 if any run leaked.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.harness_netns.kill_leaks import DOCKER_MOMENTS, NETNS_MOMENTS, check_kill_heal


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backend", choices=["netns", "docker", "both"], default="both")
    p.add_argument("--moment", action="append", help="only these moments (default: all ten)")
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()
    backends = ["netns", "docker"] if args.backend == "both" else [args.backend]
    failures = 0
    print("| backend | moment | outstanding entries at the kill | heal | leftovers after heal | not ours | s |")
    print("|---|---|---|---|---|---|---|")
    for backend in backends:
        moments = NETNS_MOMENTS if backend == "netns" else DOCKER_MOMENTS
        for name in args.moment or list(moments):
            start = time.monotonic()
            with tempfile.TemporaryDirectory(prefix="leakbench-") as tmp:
                try:
                    result = check_kill_heal(backend, Path(tmp), moments[name], args.seed)
                    foreign = sum(len(v) for v in result.foreign.values())
                    row = (str(result.outstanding_before_heal), "ok", "none", str(foreign))
                except AssertionError as exc:
                    failures += 1
                    row = ("?", "FAILED", " ".join(str(exc).split())[:300], "?")
            print(f"| {backend} | {name} | {' | '.join(row)} | {time.monotonic() - start:.0f} |", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
