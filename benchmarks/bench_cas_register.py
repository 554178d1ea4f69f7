"""Jepsen's cas-register shape (issue 29): one key, small repeated values, many processes, crashed
writes and cas. Prints, per history, our verdict with wall time, CPU time and peak memory, and
Porcupine's verdict beside it where Go is available.

    python benchmarks/bench_cas_register.py                  # the default rows
    python benchmarks/bench_cas_register.py --ops 5000 --processes 30 --values 10
    PORCUPINE_SRC=/path/to/porcupine python benchmarks/bench_cas_register.py   # a local checkout

Histories come from `checkers.gen.cas_register_history` (seeded): a quarter reads, half writes, a
quarter cas, 1-50 ms gaps and 5-400 ms durations per process (about 30 ops overlap at 30
processes), 1 % of writes and cas crashed (half of them applied). "good" is linearizable by
construction; "bad" is the same draw with one read made provably stale. Each history is checked in
a fresh process (peak memory is its own) as `kchaos check` does it, with the default budget.

Targets: 5,000 ops / 30 processes / values 0-9 decided, good and bad, in <= 10 s and <= 2 GB;
20,000 ops in <= 60 s. Porcupine gets the same timeout (--porcupine-timeout) and its memory is
capped (PORCUPINE_MEM, default 4 GiB); "Unknown" is its word for a timeout.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from checkers.gen import cas_register_history
from checkers.history import load_history
from checkers.linearizable import check

ROWS = [  # (ops, processes, values): the shape first, then its ranges
    (5_000, 30, 10),
    (20_000, 30, 10),
    (1_000, 10, 5),
    (5_000, 30, 5),
    (5_000, 30, 100),
    (5_000, 10, 10),
    (5_000, 50, 10),
    (20_000, 50, 100),
]
GO_HELPER = Path(__file__).resolve().parent / "porcupine_cas"


def one(ops: int, processes: int, values: int, seed: int, bad: bool, out: Path) -> dict:
    """Generate, write, then load + check (timed) in this process."""
    cas_register_history(ops, processes=processes, values=values, seed=seed, stale_read=bad).write_jsonl(out)
    cpu0, started = time.process_time(), time.monotonic()
    verdict = check(load_history(out), "register")
    (res,) = verdict.details["results"]
    return {
        "valid": verdict.valid,
        "method": res["method"],
        "states": res["states"],
        "wall_s": round(time.monotonic() - started, 2),
        "cpu_s": round(time.process_time() - cpu0, 2),
        "peak_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        **({"reason": res["reason"]} if "reason" in res else {}),
    }


def build_porcupine(tmp: Path) -> tuple[Path | None, str]:
    """The Go helper built against Porcupine (PORCUPINE_SRC, else Go's module download)."""
    go = shutil.which("go") or ("/usr/local/go/bin/go" if Path("/usr/local/go/bin/go").exists() else None)
    if go is None:
        return None, "Go is not installed"
    src = tmp / "porcupine_cas"
    shutil.copytree(GO_HELPER, src)
    env = {**os.environ, "GOFLAGS": "-mod=mod"}
    local = os.environ.get("PORCUPINE_SRC")
    if local:
        subprocess.run([go, "mod", "edit", f"-replace=github.com/anishathalye/porcupine={local}"], cwd=src, check=True)
    built = subprocess.run([go, "build", "-o", "porcupine_cas", "."], cwd=src, env=env, capture_output=True, text=True)
    if built.returncode:
        return None, f"Porcupine not built: {(built.stderr.strip().splitlines() or ['?'])[-1]}"
    return src / "porcupine_cas", ""


def porcupine(binary: Path, history: Path, timeout: float) -> str:
    cap = int(os.environ.get("PORCUPINE_MEM", str(4 << 30)))

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

    started = time.monotonic()
    run = subprocess.run(
        ["/usr/bin/time", "-f", "%M", str(binary), str(history), str(timeout)],
        capture_output=True,
        text=True,
        preexec_fn=limit,
        check=False,
    )
    wall = time.monotonic() - started
    peak = run.stderr.strip().splitlines()[-1] if run.stderr.strip() else "?"
    word = run.stdout.strip() or ("out of memory" if "out of memory" in run.stderr else f"exit {run.returncode}")
    mb = f"{int(peak) // 1024} MB" if peak.isdigit() else "?"
    return f"{word} in {wall:.1f} s, {mb}"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ops", type=int, nargs="*")
    p.add_argument("--processes", type=int, nargs="*")
    p.add_argument("--values", type=int, nargs="*")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--porcupine-timeout", type=float, default=60.0)
    p.add_argument("--no-porcupine", action="store_true")
    p.add_argument("--one", nargs=6, help=argparse.SUPPRESS)  # ops processes values seed good|bad path
    a = p.parse_args()
    if a.one:
        n, procs, vals, seed = (int(x) for x in a.one[:4])
        print(json.dumps(one(n, procs, vals, seed, a.one[4] == "bad", Path(a.one[5]))))
        return 0
    rows = ROWS
    if a.ops or a.processes or a.values:
        rows = [(n, q, v) for n in a.ops or [5_000] for q in a.processes or [30] for v in a.values or [10]]
    with tempfile.TemporaryDirectory() as tmp:
        binary, why = (None, "skipped") if a.no_porcupine else build_porcupine(Path(tmp))
        if why:
            print(f"Porcupine: {why}")
        for n, procs, vals in rows:
            for kind in ("good", "bad"):
                path = Path(tmp) / f"{n}-{procs}-{vals}-{kind}.jsonl"
                cmd = [sys.executable, __file__, "--one", str(n), str(procs), str(vals), str(a.seed), kind, str(path)]
                run = subprocess.run(cmd, capture_output=True, text=True, check=False)
                if run.returncode:
                    print(f"{n} ops / {procs} processes / values 0-{vals - 1} / {kind}: FAILED {run.stderr.strip()}")
                    continue
                ours = json.loads(run.stdout)
                peer = f"; Porcupine: {porcupine(binary, path, a.porcupine_timeout)}" if binary else ""
                print(
                    f"{n} ops / {procs} processes / values 0-{vals - 1} / {kind}: {json.dumps(ours)}{peer}", flush=True
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
