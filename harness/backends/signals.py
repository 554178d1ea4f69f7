"""Signal handling around host resources: termination unwinds like Ctrl-C, and cleanup is not cut short."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from types import FrameType, TracebackType
from typing import Self

# Signals that end a harness run: each must unwind through `finally` so teardown runs.
TERMINATING = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _raise_exit(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)


@contextmanager
def exit_on_termination() -> Iterator[None]:
    """SIGTERM and SIGHUP raise SystemExit, SIGINT KeyboardInterrupt, in the main thread. Python leaves
    SIGINT ignored when the process started with it ignored (a background job of a non-interactive
    shell, some CI runners): an explicit `kill -INT` must still unwind and tear down."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = {sig: signal.signal(sig, _raise_exit) for sig in (signal.SIGTERM, signal.SIGHUP)}
    old[signal.SIGINT] = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)


@contextmanager
def deferred_termination() -> Iterator[None]:
    """Ignore SIGINT/SIGTERM/SIGHUP while cleaning up: a second Ctrl-C must not leave the host half-torn-down."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = {sig: signal.signal(sig, signal.SIG_IGN) for sig in TERMINATING}
    try:
        yield
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)


class TeardownOnTermination:
    """Context manager for a backend with host resources: setup() on enter, teardown() on exit, with
    Ctrl-C, SIGTERM and SIGHUP unwinding through teardown while it is entered."""

    _signals: ExitStack | None = None

    def setup(self) -> None:
        raise NotImplementedError

    def teardown(self) -> object:
        raise NotImplementedError

    def __enter__(self) -> Self:
        self._signals = ExitStack()
        self._signals.enter_context(exit_on_termination())
        try:
            self.setup()
        except BaseException:
            self._signals.close()
            raise
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            self.teardown()
        finally:
            if self._signals is not None:
                self._signals.close()
                self._signals = None
