"""The harness's one door to its plug-ins: the built-in workloads and the nemesis.

Workloads register themselves in `vocab.workload.WORKLOADS` when the `workloads` package loads them;
the rest of the harness asks this module for a workload by name and never imports `workloads` or
`nemesis` itself (tests/docs/test_import_layers.py keeps it so). Loading is lazy: a command that
needs no workload does not import them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from vocab import workload as registry
from vocab.backend import Backend
from vocab.db import DB
from vocab.faults.options import KindOptions
from vocab.schedulers import Scheduler
from vocab.workload import Workload

if TYPE_CHECKING:
    from nemesis.nemesis import Nemesis


def load_workloads() -> None:
    """Import (and so register) the built-in workloads."""
    from workloads import load_builtin

    load_builtin()


def get_workload(name: str, sut: str | None = None) -> Workload:
    """The workload registered as `name`, its variant for `sut` where it has one (KeyError naming the
    known ones when none is)."""
    load_workloads()
    return registry.get_workload(name, sut)


def workload_suts(name: str) -> tuple[str, ...]:
    """Every system under test some variant of workload `name` speaks to (KeyError: no such workload)."""
    load_workloads()
    return registry.workload_suts(name)


def workload_names(sut: str | None = None) -> tuple[str, ...]:
    """Every registered workload, or those whose client speaks to `sut`."""
    load_workloads()
    return registry.workload_names(sut)


def find_workload(name: str, sut: str | None = None) -> Workload | None:
    """The workload registered as `name` (its variant for `sut` where it has one), or None."""
    load_workloads()
    try:
        return registry.get_workload(name, sut)
    except KeyError:
        return None


def make_nemesis(
    backend: Backend, db: DB, scheduler: Scheduler, seed: int, options: Mapping[str, KindOptions] | None = None
) -> Nemesis:
    """The nemesis of a run: it injects the faults the generator asks for on `backend`."""
    from nemesis.nemesis import Nemesis

    return Nemesis(backend, db, scheduler, seed, options)


def print_catalogue(*, as_json: bool) -> int:
    """Print the fault catalogue (`kchaos nemeses`)."""
    from nemesis.cli import print_catalogue

    return print_catalogue(as_json=as_json)
