"""One lazyfs per node of a backend on this host: the node's data dir is the mount.

Layout per node, inside the run dir: `nodes/<node>/data` (the mount point, what the node sees) and
`nodes/<node>/lazyfs/` (the state dir: `disk/` holds the files, also after unmounting).
"""

from __future__ import annotations

import contextlib
import random
import subprocess
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from harness.backends.lazyfs.mount import LazyMount, start_lazyfs
from harness.backends.ledger import Ledger


class NodeDisks:
    """The nodes' lazyfs mounts; `start` ledgers each daemon and mount before creating it."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = Path(run_dir)
        self.mounts: dict[str, LazyMount] = {}
        self.last_loss: dict[str, dict[str, Any]] = {}  # node -> what its last power loss forgot
        self.torn: random.Random | None = None  # set by tear_writes(): power losses keep torn tails

    def tear_writes(self, seed: int | None) -> None:
        """From now on each power loss keeps a random prefix of each file's un-synced tail (seeded, so a
        run's power losses repeat with its seed); None: keep nothing un-synced (the default)."""
        self.torn = None if seed is None else random.Random(seed)

    def paths(self, node: str) -> tuple[Path, Path]:
        """(state dir, mount point) of the node's lazyfs."""
        base = self.run_dir / "nodes" / node
        return base / "lazyfs", base / "data"

    def start(self, ledger: Ledger, nodes: Iterable[str]) -> None:
        for node in nodes:
            if node not in self.mounts:
                state, mountpoint = self.paths(node)
                self.mounts[node] = start_lazyfs(ledger, state, mountpoint, label=f"lazyfs {node}")

    def data_dir(self, node: str) -> str | None:
        lazy = self.mounts.get(node)
        return str(lazy.mountpoint) if lazy else None

    def power_loss(self, node: str, torn_seed: int | None = None) -> dict[str, Any]:
        """Forget what the node's filesystem had not made durable (the node must be stopped first)."""
        if torn_seed is None and self.torn is not None:
            torn_seed = self.torn.randrange(2**32)
        result = self.mounts[node].power_loss(torn_seed)
        self.last_loss[node] = result
        return result

    def status(self, node: str) -> dict[str, Any]:
        return self.mounts[node].status()

    def reap(self) -> None:
        """After the ledger's undo unmounted and stopped the daemons: collect their exit statuses."""
        for lazy in self.mounts.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                lazy.popen.wait(timeout=5)
        self.mounts.clear()
