"""Write large generated register histories (JSONL) for the linearizability benchmarks.

    python benchmarks/lin_histories.py OUT.jsonl --ops 100000 --keys 100 --processes 50 \
        [--crash-rate 0.01] [--stale-reads 1] [--value-range 5] [--seed 1]

The generator itself is `checkers.gen.register_history` (a real atomic register per key, so the
history is linearizable unless stale reads are injected).
"""

from __future__ import annotations

import argparse
import sys
import time

from checkers.gen import register_history


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out")
    p.add_argument("--ops", type=int, default=100_000)
    p.add_argument("--keys", type=int, default=100)
    p.add_argument("--processes", type=int, default=50)
    p.add_argument("--crash-rate", type=float, default=0.01)
    p.add_argument("--fail-rate", type=float, default=0.01)
    p.add_argument("--stale-reads", type=int, default=0)
    p.add_argument("--value-range", type=int, default=None)
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args(argv)
    started = time.monotonic()
    gen = register_history(
        a.ops,
        keys=a.keys,
        processes=a.processes,
        crash_rate=a.crash_rate,
        fail_rate=a.fail_rate,
        stale_reads=a.stale_reads,
        value_range=a.value_range,
        seed=a.seed,
    )
    gen.write_jsonl(a.out)
    print(
        f"{a.out}: {len(gen.events)} events, stale reads at {gen.stale_reads or 'none'} "
        f"({time.monotonic() - started:.1f} s)",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
