"""The full record of issue 24 part 7: SIGKILL `kchaos run` at ten moments per backend, `kchaos heal`,
and check the host is exactly as before. Prints one table row per run (the record in docs/trust/leaks.md).

    PYTHONPATH=. python benchmarks/bench_kill_leaks.py [--backend netns|docker|ssh|all] [--moment NAME ...]

Root only; runs one at a time (each is a real cluster). The ssh runs go to five sshd hosts in network
namespaces made for the benchmark (tests/harness_ssh/sshd_hosts.py). Exit status 1 if any run leaked.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.harness_netns.kill_leaks import MOMENTS, check_kill_heal
from tests.harness_ssh.sshd_hosts import sshd_hosts


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    backends = ["netns", "docker", "ssh", "both", "all"]
    p.add_argument("--backend", choices=backends, default="all", help="both: netns and docker; all: and ssh")
    p.add_argument("--moment", action="append", help="only these moments (default: all ten)")
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()
    backends = {"both": ["netns", "docker"], "all": ["netns", "docker", "ssh"]}.get(args.backend, [args.backend])
    failures = 0
    print("| backend | moment | outstanding entries at the kill | heal | leftovers after heal | not ours | s |")
    print("|---|---|---|---|---|---|---|")
    for backend in backends:
        moments = MOMENTS[backend]
        with contextlib.ExitStack() as stack:
            hosts = None
            if backend == "ssh":
                tmp_hosts = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="leakbench-hosts-")))
                hosts = stack.enter_context(sshd_hosts(tmp_hosts, ["h1", "h2", "h3", "h4", "h5"]))
            failures += _backend(backend, moments, args.moment or list(moments), args.seed, hosts)
    return 1 if failures else 0


def _backend(backend: str, moments: dict, names: list[str], seed: int, hosts) -> int:
    """One table row per moment; how many leaked."""
    failures = 0
    for name in names:
        if name not in moments:
            continue
        start = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="leakbench-") as tmp:
            try:
                result = check_kill_heal(backend, Path(tmp), moments[name], seed, hosts)
                foreign = sum(len(v) for v in result.foreign.values())
                row = (str(result.outstanding_before_heal), "ok", "none", str(foreign))
            except AssertionError as exc:
                failures += 1
                row = ("?", "FAILED", " ".join(str(exc).split())[:300], "?")
        print(f"| {backend} | {name} | {' | '.join(row)} | {time.monotonic() - start:.0f} |", flush=True)
    return failures


if __name__ == "__main__":
    sys.exit(main())
