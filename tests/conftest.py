"""Suite-wide rules.

Under `bash setup.sh test` (which sets KCHAOS_REQUIRE_ALL=1) every prerequisite a test could skip for
(the compiled checker core, `../shared`'s histories, root, docker, Spark) has been installed by the same
command, so a skip there means a broken set-up that would otherwise pass silently: it fails instead,
naming the skip's reason. A developer running pytest by hand still gets ordinary skips.
"""

from __future__ import annotations

import os

import pytest

REQUIRE_ALL = "KCHAOS_REQUIRE_ALL"


def _require_all() -> bool:
    return os.environ.get(REQUIRE_ALL, "") not in ("", "0")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
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
