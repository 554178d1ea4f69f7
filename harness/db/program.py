"""`ProgramDB`: what the adapters of someone else's program (etcd, Kafka) share: one process per node
started by the backend, restarted, stopped and collected the same way."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

from vocab.db import DB


class ProgramDB(DB):
    """A cluster of someone else's program (etcd, Kafka) started by the backend, one process per node:
    restart, stop and collect through the backend alone."""

    def restart_node(self, node: str) -> None:
        self._backend().restart(node)

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
