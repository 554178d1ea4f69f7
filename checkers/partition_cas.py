"""`partition-cas`: AlterPartition ops checked for linearizability per partition (model `partition-cas`).

The isr-changes workload's AlterPartition requests are compare-and-sets on (leader epoch, partition
epoch); `checkers.models.PartitionCasModel` says what each does and allows the controller's own moves
in between. This entry point runs the linearizability checker on the history's `alter` ops only, so
it can sit beside other checkers of the same history without sharing their `--model`.
"""

from __future__ import annotations

from typing import Any

from checkers import linearizable
from checkers.history import History
from checkers.models import PartitionCasModel
from checkers.verdict import UNKNOWN, Verdict

CHECKER = "partition-cas"


def check_partition_cas(history: History, *, timeout: float | None = None, jobs: int = 1) -> Verdict:
    alters = History([op for op in history.ops if op.f == "alter"], history.nemesis, history.source)
    if not any(op.type == "ok" for op in alters.ops):
        return Verdict(CHECKER, UNKNOWN, {"reason": "no acknowledged AlterPartition in the history"})
    verdict = linearizable.check(alters, PartitionCasModel(), timeout=timeout, jobs=jobs, all_keys=True)
    return Verdict(CHECKER, verdict.valid, verdict.details)


def check_from_args(history: History, args: Any) -> Verdict:
    return check_partition_cas(history, timeout=getattr(args, "timeout", None))


def summarize(verdict: Verdict) -> list[str]:
    if "reason" in verdict.details:
        return [f"{CHECKER}: {verdict.valid} ({verdict.details['reason']})"]
    return [line.replace("linearizable (partition-cas)", CHECKER, 1) for line in linearizable.summarize(verdict)]
