"""Where a lazyfs instance keeps its files (all inside the run dir)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class StateDir:
    """`disk/` is the backing tree (what readers see), `limbo/` holds inodes a power loss may bring back,
    `control.sock` the control socket, `daemon.log` the daemon's output."""

    root: Path

    @property
    def disk(self) -> Path:
        return self.root / "disk"

    @property
    def limbo(self) -> Path:
        return self.root / "limbo"

    @property
    def control(self) -> Path:
        return self.root / "control.sock"

    @property
    def log(self) -> Path:
        return self.root / "daemon.log"

    def make(self) -> None:
        for d in (self.disk, self.limbo):
            d.mkdir(parents=True, exist_ok=True)
