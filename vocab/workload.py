"""The workload plug-in protocol: what the clients do in a run, and which checkers judge the history.

A `Workload` is registered by name in `WORKLOADS` (the built-in ones, in the `workloads` package, when
`harness.plugins` loads them); for one run it makes a `WorkloadRun` that sets the
cluster up for it (topics...), gives the client generator of the main phase, of the recovery window
after the final heal and of the final reads, and the client (a `vocab.invocation.Handler`) that
carries ops out on the run's backend. The workload names the checkers that judge its history and
their options (as `kchaos check` flags, attribute names); the harness adds the end-of-run checks
every run gets (harness/run_report.py `END_CHECKS`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from vocab.backend import Backend
from vocab.db import DB
from vocab.invocation import Handler
from vocab.schedulers import Scheduler


def client_login(db: Any) -> dict[str, str]:
    """AdminClient keyword arguments that log the harness's clients in (SASL/PLAIN) when the cluster
    adapter has logins (`db.login()`, e.g. the kraft adapter); none otherwise."""
    login = getattr(db, "login", None)
    return dict(login()) if callable(login) else {}


@dataclass
class WorkloadEnv:
    """What a workload may use: the test, the cluster adapter, the backend and the run's scheduler."""

    spec: Any  # harness.test_spec.TestSpec
    db: DB
    backend: Backend
    scheduler: Scheduler
    seed: int

    def option(self, name: str, default: Any) -> Any:
        return self.spec.workload_options.get(name, default)


class WorkloadRun(ABC):
    """One run of a workload (see the module docstring)."""

    @abstractmethod
    def setup(self) -> None:
        """Prepare the cluster (blocking; runs once the cluster is ready, before the run phase)."""

    @abstractmethod
    def generator(self) -> Any:
        """The client generator of the main phase (the runner adds the rate and the time limit).
        Called again for the recovery window: values that must be unique must stay unique across calls."""

    def recovery_generator(self) -> Any:
        """Client ops during the recovery window after the final heal (the availability checker needs
        writes there): by default the main generator again."""
        return self.generator()

    def final_generator(self) -> Any | None:
        """Client ops after the faults are healed and the cluster recovered (None: none)."""
        return None

    @abstractmethod
    def client(self) -> Handler:
        """The handler that carries out client ops."""

    def close(self) -> None:  # noqa: B027 - optional
        """Release clients and connections."""


@dataclass(frozen=True)
class Workload:
    name: str
    checkers: tuple[str, ...]  # checker names (checkers.registry) run on its history
    make: Callable[[WorkloadEnv], WorkloadRun]
    description: str = ""
    # checker -> its options (attribute names of `kchaos check`'s flags), e.g. {"linearizable": {"model": "register"}}
    checker_options: dict[str, dict[str, Any]] = field(default_factory=dict)
    suts: tuple[str, ...] = ("kraft",)  # the systems under test its client speaks to (harness.db.SUTS)


WORKLOADS: dict[str, Workload] = {}  # name -> the reference cluster's workload of that name (else the first)
# (name, sut) -> the workload of that name for that system: one name (e.g. config-register) may have a
# variant per system under test, each with its own client and the checkers of what that system promises
SUT_WORKLOADS: dict[tuple[str, str], Workload] = {}


def register_workload(workload: Workload) -> Workload:
    if workload.name not in WORKLOADS or "kraft" in workload.suts:
        WORKLOADS[workload.name] = workload
    for sut in workload.suts:
        SUT_WORKLOADS[(workload.name, sut)] = workload
    return workload


def unregister_workload(name: str) -> None:
    """Forget workload `name` and every system's variant of it (a test's own workloads, after the test)."""
    WORKLOADS.pop(name, None)
    for key in [k for k in SUT_WORKLOADS if k[0] == name]:
        del SUT_WORKLOADS[key]


def get_workload(name: str, sut: str | None = None) -> Workload:
    """The registered workload `name`; with `sut`, its variant for that system when it has one
    (`harness.plugins.get_workload` loads the built-in ones first)."""
    if sut is not None and (name, sut) in SUT_WORKLOADS:
        return SUT_WORKLOADS[(name, sut)]
    try:
        return WORKLOADS[name]
    except KeyError:
        raise KeyError(f"unknown workload {name!r} (known: {', '.join(sorted(WORKLOADS))})") from None


def workload_suts(name: str) -> tuple[str, ...]:
    """Every system under test some variant of workload `name` speaks to (KeyError: no such workload)."""
    get_workload(name)
    return tuple(sorted({sut for (n, sut) in SUT_WORKLOADS if n == name}))


def workload_names(sut: str | None = None) -> tuple[str, ...]:
    """Every registered workload, or those whose client speaks to `sut` (the planted-bug matrix and
    the kraft suites want the reference cluster's only)."""
    return tuple(sorted({name for (name, s) in SUT_WORKLOADS if sut is None or s == sut}))
