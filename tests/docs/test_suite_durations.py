"""benchmarks/suite_durations.py: the README's per-directory suite times come from pytest's own JUnit XML."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.suite_durations import main, read

XML = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" tests="3" time="{wall}">
<testcase classname="tests.sim.test_a" name="test_one" time="{a}"/>
<testcase classname="tests.sim.test_b" name="test_two" time="2.5"/>
<testcase classname="tests.raft.test_c" name="test_three[x]" time="0.25"/>
</testsuite></testsuites>"""


def test_durations_are_summed_per_directory_and_the_wall_is_the_sessions(tmp_path: Path, capsys) -> None:
    before, after = tmp_path / "before.xml", tmp_path / "after.xml"
    before.write_text(XML.format(wall=600.0, a=10.0))
    after.write_text(XML.format(wall=125.0, a=1.5))
    times = read(after)
    assert times.wall_s == 125.0 and times.tests == 3
    assert times.per_dir == {"sim": 4.0, "raft": 0.25}
    assert times.per_test["tests/raft/test_c.py::test_three[x]"] == 0.25
    assert main([str(before), str(after), "--longest", "1"]) == 0
    out = capsys.readouterr().out
    assert "| `tests/sim` | 12 | 4 |" in out
    assert "| **wall (pytest session)** | **10 min 00 s** | **2 min 05 s** |" in out
    assert out.rstrip().endswith("2.5 s  tests/sim/test_b.py::test_two")


@pytest.mark.parametrize("text", ["", "<nope/>", "not xml"])
def test_a_file_pytest_did_not_write_is_one_line_and_exit_2(tmp_path: Path, capsys, text: str) -> None:
    path = tmp_path / "junit.xml"
    path.write_text(text)
    assert main([str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"suite_durations: {path}: ") and err.count("\n") == 1


CPU_XML = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" tests="2" time="60">
<testcase classname="tests.sim.test_a" name="test_one" time="3"><properties>
<property name="cpu_s" value="90.5"/></properties></testcase>
<testcase classname="tests.raft.test_c" name="test_two" time="1"><properties>
<property name="other" value="7"/><property name="cpu_s" value="29.5"/></properties></testcase>
</testsuite></testsuites>"""


def test_cpu_recorded_per_test_is_summed_per_directory(tmp_path: Path, capsys) -> None:
    path = tmp_path / "cpu.xml"
    path.write_text(CPU_XML)
    times = read(path)
    assert times.cpu_per_dir == {"sim": 90.5, "raft": 29.5}
    assert times.cpu_per_test["tests/raft/test_c.py::test_two"] == 29.5
    assert main([str(path), "--longest", "1"]) == 0
    out = capsys.readouterr().out
    assert "| `tests/sim` | 90 |" in out.split("CPU s")[1]
    assert "| **CPU-minutes** | **2.0** |" in out
    assert out.rstrip().endswith("90.5 CPU s  tests/sim/test_a.py::test_one")


def test_the_suites_own_xml_carries_each_tests_cpu(tmp_path: Path) -> None:
    """tests/conftest.py records a test's CPU as a JUnit property: its reaped children's, and what a
    child still running at the end (a pool's forkserver) has spent and reaped of its own children."""
    shutil.copy(Path(__file__).parents[1] / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "test_spin.py").write_text(
        """import atexit, subprocess, sys

SPIN = "import time\\nt = time.process_time()\\nwhile time.process_time() - t < 0.3: pass"
POOL = ("import subprocess, sys, time\\nsubprocess.run([sys.executable, '-c', sys.argv[1]])\\n"
        "print('spun', flush=True)\\ntime.sleep(60)")

def test_reaped():
    subprocess.run([sys.executable, "-c", SPIN], check=True)

def test_below_a_live_child():
    child = subprocess.Popen([sys.executable, "-c", POOL, SPIN], stdout=subprocess.PIPE, text=True)
    atexit.register(child.kill)  # alive past this test's teardown, gone with the session
    assert child.stdout.readline() == "spun\\n"
"""
    )
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:xdist", "-p", "no:cacheprovider", "--junitxml=out.xml", "-q"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    cpu = read(tmp_path / "out.xml").cpu_per_test
    assert cpu["test_spin.py::test_reaped"] >= 0.3
    assert cpu["test_spin.py::test_below_a_live_child"] >= 0.3
