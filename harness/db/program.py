"""`ProgramDB`: what the adapters of someone else's program (etcd, Kafka) share: one process per node
started by the backend, restarted, stopped and collected the same way."""

from __future__ import annotations

import contextlib
import re
import time
from abc import abstractmethod
from collections.abc import Callable
from pathlib import Path
from typing import Any

from vocab.db import DB, DBError

# A member that has been down this long while the cluster is awaited has exited for good: nothing
# restarts someone else's program (the runner's recovery restarts the killed ones before it waits).
EXITED_AFTER_S = 2.0
# The last lines of a member's output read for its last words, and the most of one line quoted.
LAST_LINES, LAST_WORDS_CHARS = 200, 300
TAIL_BYTES = 1 << 16  # read from the end of a log for them
# A line that says what went wrong (log4j's ERROR/FATAL, zap's "level":"fatal", Go's flag package's
# `invalid value ... parse error` before its usage text, a Java exception or its last "Caused by:",
# the root cause), not a stack frame (`\tat ...`) or the JVM's "... 12 more".
_TELLING = re.compile(r"\b(ERROR|FATAL|fatal|panic|error|invalid)\b|(Exception|Error)\b")
_FRAME = re.compile(r"^\s+(at |\.\.\. \d+ more)")


class ProgramDB(DB):
    """A cluster of someone else's program (etcd, Kafka) started by the backend, one process per node:
    restart, stop and collect through the backend alone."""

    def restart_node(self, node: str) -> None:
        self._backend().restart(node)

    def remote_hosts(self) -> bool:
        """Whether the nodes run on hosts with files of their own (ssh, VMs), where the program must be
        installed and the nodes' directories are made, rather than on this machine's (netns, docker)."""
        return hasattr(self._backend(), "ship_files")

    def wait_ready(self, timeout_s: float) -> None:
        self.wait_ready_unless_exited(self._unready, timeout_s)

    @abstractmethod
    def _unready(self) -> str | None:
        """What keeps the cluster from being ready (the system's own answers), or None when it is ready."""

    def wait_ready_unless_exited(self, unready: Callable[[], str | None], timeout_s: float) -> None:
        """`poll_ready`, except that a member down for `EXITED_AFTER_S` fails at once with a DBError
        quoting its last words (a Kafka that cannot bind its port should not cost the whole timeout)."""
        down_since: dict[str, float] = {}

        def check_exited() -> None:
            backend, now = self._backend(), time.monotonic()
            for node in self.nodes:
                if backend.is_alive(node):
                    down_since.pop(node, None)
                elif now - down_since.setdefault(node, now) >= EXITED_AFTER_S:
                    words = self.last_words(node)
                    raise DBError(f"{self.name} node {node} exited" + (f"; its output ends: {words}" if words else ""))

        self.poll_ready(unready, timeout_s, before_each=check_exited)

    def last_words(self, node: str) -> str | None:
        """The line of the node's output (stderr.log, then stdout.log, as the local backends write them
        under nodes/NODE, or their ends fetched from a remote host) that best says why it stopped: the
        last that names an error, else the last line. None when there is none."""
        if self.run_dir is None:
            return None
        remote_tail = getattr(self.backend, "log_tail", None)
        for name in ("stderr.log", "stdout.log"):
            if remote_tail is not None:
                lines = (remote_tail(node, name, TAIL_BYTES) or "").splitlines()[-LAST_LINES:]
            else:
                lines = _tail_lines(Path(self.run_dir) / "nodes" / node / name, LAST_LINES)
            lines = [line for line in lines if line.strip() and not _FRAME.match(line)]
            if lines:
                telling = [line for line in lines if _TELLING.search(line)]
                words = (telling or lines)[-1].strip()
                return words if len(words) <= LAST_WORDS_CHARS else words[: LAST_WORDS_CHARS - 1] + "…"
        return None

    def teardown(self) -> None:
        if self.backend is None:
            return
        for node in self.nodes:
            with contextlib.suppress(Exception):
                self.backend.kill(node)

    def collect_members(
        self, run_dir: Path, stop: bool, statuses: dict[str, Any], status_file: str, stop_timeout_s: float
    ) -> list[str]:
        """`collect` for a real program: stop the members (SIGTERM, kill -9 after `stop_timeout_s`) when
        `stop`, write each node's status answer (taken before stopping; None: a warning; nodes absent
        from `statuses` have none) to nodes/<node>/`status_file`, and fetch the node's files (a remote
        backend) or list its data dir."""
        import json

        backend = self._backend()
        warnings: list[str] = []
        if stop:
            alive = [n for n in self.nodes if backend.is_alive(n)]
            killed = backend.stop_nodes(alive, stop_timeout_s)  # type: ignore[attr-defined]
            warnings += [f"{n}: did not stop within {stop_timeout_s:.0f} s of SIGTERM; killed" for n in killed]
        remote_collect = getattr(backend, "collect_node", None)
        for node in self.nodes:
            target = Path(run_dir) / "nodes" / node
            target.mkdir(parents=True, exist_ok=True)
            if node in statuses and statuses[node] is None:
                warnings.append(f"{node}: no status answer at the end of the run")
            elif node in statuses:
                (target / status_file).write_text(json.dumps(statuses[node], sort_keys=True) + "\n", encoding="utf-8")
            if remote_collect is not None:
                warnings += remote_collect(node, target)
                continue
            data = Path(self.data_dir(node))  # type: ignore[attr-defined]
            listing = sorted(str(p.relative_to(data)) for p in data.rglob("*")) if data.is_dir() else []
            (target / "data-dir.txt").write_text("\n".join(listing) + "\n", encoding="utf-8")
        return warnings


def _tail_lines(path: Path, count: int, chunk: int = TAIL_BYTES) -> list[str]:
    """The last `count` lines of a file that may be large (a JVM's log), [] when it cannot be read."""
    try:
        with path.open("rb") as f:
            f.seek(0, 2)
            size = f.tell()
            f.seek(max(0, size - chunk))
            data = f.read()
    except OSError:
        return []
    return data.decode("utf-8", errors="replace").splitlines()[-count:]
