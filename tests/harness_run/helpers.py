"""Shared pieces of the runner tests: small resolved tests and a results root per test."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from harness.test_spec import Cluster, TestSpec

# The checks every workload's run gets at its end (beside the workload's own checkers).
END_OF_RUN = frozenset(
    {"log-agreement", "availability", "image-replay", "at-most-once", "quorum-progress", "forgery", "elections"}
)


def sim_spec(seed: int = 7, **changes: Any) -> TestSpec:
    """A short simulated test: 3 controllers + 2 brokers, partitions and kills every 2 s."""
    base = TestSpec(
        name="harness-run-test",
        seed=seed,
        backend="sim",
        cluster=Cluster(controllers=3, brokers=2),
        nemesis=("partition", "kill"),
        nemesis_interval_s=2.0,
        nemesis_duration_s=2.0,
        time_limit_s=8.0,
        concurrency=4,
        rate=40.0,
        recovery_s=10.0,  # the availability window: a whole cluster killed needs ~5 s to come back
    )
    return dataclasses.replace(base, **changes)


def history_lines(run_dir: Path) -> list[str]:
    return (run_dir / "history.jsonl").read_text().splitlines()


def one_cell_suite(path: Path, workload: str, nemesis: str, kinds: tuple[str, ...], **defaults: Any) -> Path:
    """A suite file of one simulated cell (3+2, seed 1) at `path`: what `kchaos suite`/`gate` record."""
    lines = [f'name = "{path.stem}"', "seeds = 1", "[defaults]"]
    lines += [f"{key} = {value}" for key, value in defaults.items()]
    lines += ["[matrix]", f'workloads = ["{workload}"]', 'clusters = ["3+2"]', 'backends = ["sim"]']
    lines += ["[matrix.nemeses]", f"{nemesis} = {json.dumps(list(kinds))}"]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path
