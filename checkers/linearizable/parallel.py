"""Keys decided in parallel by forked workers.

A worker is forked with the whole job (ops, model, budgets) in its memory: fork hands a `Process`
its target and arguments without pickling them, so no op or step-function closure crosses a pipe,
and nothing is parked in a module global for the workers to find. Only key indices go out and
`KeyResult`s come back.
"""

from __future__ import annotations

import multiprocessing
import queue
import traceback
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from multiprocessing.process import BaseProcess
from typing import Any

from checkers.history import Op
from checkers.linearizable.keys import check_key
from checkers.linearizable.report import KeyResult
from checkers.models import Model
from checkers.progress import Tracker

_POLL_S = 1.0  # how often a parent waiting for results looks whether its workers still live


@dataclass(frozen=True)
class KeyJob:
    """Every key of one history, and the budgets they share."""

    parts: Sequence[tuple[Any, list[Op]]]  # (key, its ops), as the model partitioned the history
    model: Model
    deadline: float
    max_states: int

    def run(self, index: int, tracker: Tracker | None = None) -> KeyResult:
        key, ops = self.parts[index]
        return check_key(self.model, key, ops, deadline=self.deadline, max_states=self.max_states, tracker=tracker)


def run_keys(job: KeyJob, order: Sequence[int], jobs: int, tracker: Tracker | None) -> Iterator[tuple[int, KeyResult]]:
    """(index, result) for the keys of `order`: in this process when `jobs` is 1 (in order), else
    in `jobs` forked workers (as they finish). Closing the iterator early stops the workers."""
    if jobs <= 1:
        for i in order:
            yield i, job.run(i, tracker)
        return
    ctx = multiprocessing.get_context("fork")
    tasks = ctx.SimpleQueue()
    results = ctx.Queue()
    for i in order:
        tasks.put(i)
    for _ in range(jobs):
        tasks.put(None)
    workers = [ctx.Process(target=_work, args=(job, tasks, results), daemon=True) for _ in range(jobs)]
    for w in workers:
        w.start()
    try:
        for _ in order:
            kind, index, payload = _next_result(results, workers)
            if kind == "error":
                raise RuntimeError(f"linearizability worker failed on key {job.parts[index][0]!r}:\n{payload}")
            yield index, payload
    finally:
        for w in workers:
            if w.is_alive():
                w.terminate()
        for w in workers:
            w.join()
        results.close()


def _next_result(results: Any, workers: list[BaseProcess]) -> tuple[str, int, Any]:
    while True:
        try:
            return results.get(timeout=_POLL_S)
        except queue.Empty:
            if not any(w.is_alive() for w in workers):
                raise RuntimeError("every linearizability worker died with keys still undecided") from None


def _work(job: KeyJob, tasks: Any, results: Any) -> None:
    """A forked worker: decide keys until the sentinel. What it writes to a tracker nobody reads,
    so it gets none."""
    while (index := tasks.get()) is not None:
        try:
            results.put(("ok", index, job.run(index)))
        except Exception:  # told to the parent, which raises it; this worker takes no more keys
            results.put(("error", index, traceback.format_exc()))
            return
