"""Suite-wide rules.

Under `bash setup.sh test` (which sets KCHAOS_REQUIRE_ALL=1) every prerequisite a test could skip for
(the compiled checker core, `../shared`'s histories, root, docker, Spark) has been installed by the same
command, so a skip there means a broken set-up that would otherwise pass silently: it fails instead,
naming the skip's reason. A developer running pytest by hand still gets ordinary skips.

`setup.sh test` runs the suite on pytest-xdist workers (`--dist loadgroup`): most tests wait on real
processes, sockets and simulated runs, and every namespace, bridge, port, run directory and container
they make carries a name of its own. Tests that judge state the whole host shares run one at a time on
one worker, in the groups of SHARED_HOST_STATE.

Each test's CPU, its worker's whole process tree from set-up to teardown, goes into the JUnit XML:
the suite is bound by CPU on two cores, and a test's wall under four workers says little of its work.
"""

from __future__ import annotations

import os

import pytest

CPU_PROPERTY = "cpu_s"  # each test's CPU-seconds, a JUnit property (benchmarks/suite_durations.py)
_CPU_AT_SETUP = pytest.StashKey[float]()
_TICKS_PER_S = os.sysconf("SC_CLK_TCK")

REQUIRE_ALL = "KCHAOS_REQUIRE_ALL"

# xdist group -> test files (relative to tests/) whose tests must not overlap each other:
# - docker: the engine's containers and networks (the kill-leak tests count every container labelled
#   kchaos.run as theirs, and so does the netns and ssh kill-leak tests' snapshot of the host);
# - vms: three qemu guests per test, each emulating a CPU (TCG), which a second VM test would starve;
# - doctor: `kchaos doctor` makes kcdoc... namespaces and heals dead doctors' ledgers in one shared
#   directory, and its tests check that no kcdoc... namespace is left.
SHARED_HOST_STATE = {
    "docker": (
        "harness_docker/",
        "harness_netns/test_kill_leaks.py",
        "harness_ssh/test_kill_leaks.py",
        "kafka/test_kafka_run.py::test_config_register_on_kafka_in_docker_containers",
    ),
    "vms": ("harness_vagrant/",),
    "doctor": ("harness_netns/test_cli.py", "harness_netns/test_fault_doctor.py", "lazyfs/test_doctor.py"),
}


# Session fixtures that cost tens of seconds each (a Spark JVM, a report job): every test that uses one
# runs on one worker, which starts it once instead of once per worker.
ONE_SESSION_FOR = frozenset({"spark", "report"})

# The longest files and groups, longest first: handed out first, so that no worker starts a 10-minute
# file while the others finish (the README's suite-time table: python benchmarks/suite_durations.py).
LONGEST_FIRST = (
    "harness_vagrant/",
    "suite/test_gate.py",
    "bugs/test_matrix.py",
    "harness_docker/",
    "client/test_kafka_netns_runs.py",
    "reports/",
    "kafka/",
    "nemesis/test_sweep.py",
)


def _rank(nodeid: str) -> int:
    where = nodeid.removeprefix("tests/")
    return next((i for i, prefix in enumerate(LONGEST_FIRST) if where.startswith(prefix)), len(LONGEST_FIRST))


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Put each test of SHARED_HOST_STATE in its xdist group, and the longest files first (a file's tests
    stay together and in order, so its module fixtures are made once)."""
    items.sort(key=lambda item: _rank(item.nodeid))
    for item in items:
        where = item.nodeid.removeprefix("tests/")
        group = next((g for g, prefixes in SHARED_HOST_STATE.items() if where.startswith(prefixes)), None)
        if group is None and ONE_SESSION_FOR.intersection(getattr(item, "fixturenames", ())):
            group = "spark"  # one Spark session (and one report job over the synthetic results) for them all
        if group is None and _shares_a_fixture_across_tests(item):
            group = where.split("::")[0]  # its file's tests on one worker, so the fixture is made once
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))


def _shares_a_fixture_across_tests(item) -> bool:
    """Whether the test uses a module-, class- or package-scoped fixture (session ones are per worker)."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return False
    return any(d.scope in ("module", "class", "package") for defs in info.name2fixturedefs.values() for d in defs)


def _require_all() -> bool:
    return os.environ.get(REQUIRE_ALL, "") not in ("", "0")


def _cpu_seconds() -> float:
    """CPU of this worker and every process below it, the dead ones their parents reaped included
    (utime + stime + cutime + cstime): a pool's forkserver, a Spark JVM, a node, a qemu guest. A process
    reparented away from the tree (a daemon, a docker container) is not counted."""
    stats: dict[int, tuple[int, int]] = {}  # pid -> (ppid, ticks)
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue  # gone meanwhile
        stats[int(entry.name)] = (int(fields[1]), sum(int(x) for x in fields[11:15]))
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in stats.items():
        children.setdefault(ppid, []).append(pid)
    ticks, todo = 0, [os.getpid()]
    while todo:
        pid = todo.pop()
        ticks += stats.get(pid, (0, 0))[1]
        todo.extend(children.get(pid, ()))
    return ticks / _TICKS_PER_S


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_setup(item):
    item.stash[_CPU_AT_SETUP] = _cpu_seconds()
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Record each test's CPU (set-up to teardown) as a JUnit property, so that
    benchmarks/suite_durations.py can say where the suite's CPU-minutes go: a 2-core machine holds 30 of
    them in 15 minutes. Processes outside the worker's tree (docker's containers) are not in it."""
    if call.when == "teardown" and _CPU_AT_SETUP in item.stash:
        item.user_properties.append((CPU_PROPERTY, round(_cpu_seconds() - item.stash[_CPU_AT_SETUP], 2)))
    outcome = yield
    report = outcome.get_result()
    if _require_all() and report.skipped and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"skipped under {REQUIRE_ALL}=1 (setup.sh test installs every prerequisite): {reason}"


def pytest_sessionfinish(session, exitstatus):
    """A module skipped as a whole (`pytest.skip(..., allow_module_level=True)`) fails the run too."""
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if not _require_all() or reporter is None:
        return
    skipped = [r for r in reporter.stats.get("skipped", []) if isinstance(r, pytest.CollectReport)]
    for report in skipped:
        reporter.write_line(f"FAILED {report.nodeid}: module skipped under {REQUIRE_ALL}=1", red=True)
    if skipped and session.exitstatus == 0:
        session.exitstatus = 1
