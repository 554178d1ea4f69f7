"""A process pool for runs that may crash or hang: each task has a deadline, and a worker that dies or
overstays is replaced, its task failed with `RunLost` (the reason), the other tasks untouched.

`concurrent.futures.ProcessPoolExecutor` cannot do this: one worker that dies breaks the whole pool
(every pending future fails), and a hung worker cannot be stopped at all. Batch runs (`kchaos bugs`,
`kchaos suite`) need a crashed or hung run to become one `unknown` verdict, never a stuck batch.

Workers are long-lived processes started from a fork server (the parent has threads: the dispatcher
here, a live progress display) with the harness preloaded, each reading tasks from its own pipe. A
task past its deadline gets SIGTERM (the runner then undoes what it set up on the hosts), and
SIGKILL after `grace_s`.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import multiprocessing as mp
import multiprocessing.connection as mpc
import signal
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

PRELOAD = ("harness.runner", "harness.run_report")  # imported once in the fork server, not per worker


class RunLost(Exception):
    """The task's process died or overstayed its deadline; the message says which."""


@dataclass
class _Task:
    future: cf.Future[Any]
    fn: Callable[..., Any]
    args: tuple[Any, ...]
    timeout_s: float | None


@dataclass
class _Worker:
    process: Any
    conn: Any
    task: _Task | None = None
    deadline: float | None = None


def _worker_main(conn: Any) -> None:
    """A worker: run each task it is sent and send back ("ok", result) or ("error", exception).
    Ctrl-C is the parent's to handle (it stops the workers with SIGTERM), not each worker's."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    while True:
        try:
            task = conn.recv()
        except (EOFError, OSError):
            return
        if task is None:
            return
        fn, args = task
        try:
            reply: tuple[str, Any] = ("ok", fn(*args))
        except BaseException as exc:
            reply = ("error", exc, traceback.format_exc())
        try:
            conn.send(reply)
        except Exception:  # an unpicklable result or exception: its text still goes back
            conn.send(("error", RuntimeError(repr(reply[1])), ""))


class RunPool(cf.Executor):
    """`jobs` worker processes; `submit(fn, *args)` as an Executor, plus `submit_with_timeout`."""

    def __init__(self, jobs: int, *, timeout_s: float | None = None, grace_s: float = 10.0) -> None:
        self.jobs = max(1, jobs)
        self.timeout_s = timeout_s
        self.grace_s = grace_s
        self._ctx = mp.get_context("forkserver")
        with contextlib.suppress(ValueError):
            self._ctx.set_forkserver_preload(list(PRELOAD))
        self._queue: deque[_Task] = deque()
        self._workers: list[_Worker] = []
        self._lock = threading.Lock()
        self._wake_r, self._wake_w = mp.Pipe(duplex=False)
        self._closing = False
        self._stop_now = False
        self._thread = threading.Thread(target=self._dispatch, name="run-pool", daemon=True)
        self._thread.start()

    # --- the Executor interface -----------------------------------------------------------------

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> cf.Future[Any]:
        if kwargs:
            raise TypeError("RunPool.submit takes positional arguments only")
        return self.submit_with_timeout(self.timeout_s, fn, *args)

    def submit_with_timeout(self, timeout_s: float | None, fn: Callable[..., Any], *args: Any) -> cf.Future[Any]:
        future: cf.Future[Any] = cf.Future()
        with self._lock:
            if self._closing:
                raise RuntimeError("the pool is shut down")
            self._queue.append(_Task(future, fn, args, timeout_s))
        self._wake()
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self._lock:
            self._closing = True
            if cancel_futures:
                while self._queue:
                    self._queue.popleft().future.cancel()
        self._wake()
        if wait:
            self._thread.join()

    def stop(self) -> None:
        """Stop at once (Ctrl-C, an error in the caller): queued tasks are cancelled, running ones
        stopped like hung ones (SIGTERM, then SIGKILL) and failed with RunLost; returns when done."""
        with self._lock:
            self._closing = self._stop_now = True
            while self._queue:
                self._queue.popleft().future.cancel()
        self._wake()
        self._thread.join()

    # --- the dispatcher thread ------------------------------------------------------------------

    def _wake(self) -> None:
        with contextlib.suppress(OSError):
            self._wake_w.send_bytes(b".")

    def _start_worker(self) -> _Worker:
        parent, child = self._ctx.Pipe()
        process = self._ctx.Process(target=_worker_main, args=(child,), daemon=True)
        process.start()
        child.close()
        worker = _Worker(process, parent)
        self._workers.append(worker)
        return worker

    def _assign(self) -> None:
        with self._lock:
            while self._queue:
                idle = next((w for w in self._workers if w.task is None), None)
                if idle is None and len(self._workers) >= self.jobs:
                    return
                task = self._queue.popleft()
                if not task.future.set_running_or_notify_cancel():
                    continue
                worker = idle or self._start_worker()
                try:
                    worker.conn.send((task.fn, task.args))
                except Exception as exc:  # e.g. arguments that do not pickle: that task's error only
                    task.future.set_exception(exc)
                    continue
                worker.task = task
                worker.deadline = None if task.timeout_s is None else time.monotonic() + task.timeout_s

    def _retire(self, worker: _Worker, reason: str | None) -> None:
        """Stop a worker (SIGTERM, then SIGKILL after the grace) and fail its task with `reason`."""
        process = worker.process
        if process.is_alive():
            process.terminate()
            process.join(self.grace_s)
            if process.is_alive():
                process.kill()
                process.join()
        worker.conn.close()
        self._workers.remove(worker)
        if worker.task is not None and reason is not None:
            worker.task.future.set_exception(RunLost(reason))

    def _dispatch(self) -> None:
        try:
            while True:
                self._assign()
                with self._lock:
                    done = self._closing and not self._queue and all(w.task is None for w in self._workers)
                if done or self._stop_now:
                    break
                deadlines = [w.deadline for w in self._workers if w.deadline is not None]
                wait_s = None if not deadlines else max(0.0, min(deadlines) - time.monotonic())
                ready = mpc.wait(
                    [self._wake_r, *(w.conn for w in self._workers), *(w.process.sentinel for w in self._workers)],
                    timeout=wait_s,
                )
                if self._wake_r in ready:
                    while self._wake_r.poll():
                        self._wake_r.recv_bytes()
                self._collect(ready)
                self._expire()
        finally:
            for worker in list(self._workers):
                with contextlib.suppress(Exception):
                    worker.conn.send(None)
                self._retire(worker, "stopped: the batch was interrupted")

    def _collect(self, ready: list[Any]) -> None:
        for worker in list(self._workers):
            if worker.conn in ready:
                try:
                    reply = worker.conn.recv()
                except (EOFError, OSError):
                    reply = None
                task, worker.task, worker.deadline = worker.task, None, None
                if reply is None:  # the pipe closed: the process is gone
                    worker.task = task
                    self._retire(worker, _died(worker.process))
                elif task is not None:
                    if reply[0] == "ok":
                        task.future.set_result(reply[1])
                    else:
                        task.future.set_exception(reply[1])
            elif worker.process.sentinel in ready and worker in self._workers:
                self._retire(worker, _died(worker.process))

    def _expire(self) -> None:
        now = time.monotonic()
        for worker in list(self._workers):
            if worker.deadline is not None and now >= worker.deadline and worker.task is not None:
                limit = worker.task.timeout_s or 0.0
                self._retire(worker, f"hung: no verdict within {limit:g} s, its process was stopped")


def _died(process: Any) -> str:
    process.join(1.0)
    code = process.exitcode
    if code is not None and code < 0:
        return f"crashed: its process died of signal {-code}"
    return f"crashed: its process exited with code {code} before returning a verdict"


__all__ = ["RunLost", "RunPool"]
