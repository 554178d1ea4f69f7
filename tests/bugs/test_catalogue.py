"""The catalogue of planted bugs: complete entries, one switch per bug in the node, the refusal rule,
the loud warning, and the one-line refusal (exit 254) of a node started with a bug in a
production-looking config."""

from __future__ import annotations

import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from node.bugs import (
    BY_NAME,
    CATALOGUE,
    COMPONENTS,
    NO_BUGS,
    Bugs,
    UnknownBugError,
    parse_bugs,
    refusal,
    warning_lines,
)
from node.raft.config import ConfigError
from node.raft.node import RaftNode
from node.raft.storage import LoadedState
from node.runtime.local_cluster import unused_address
from node.runtime.properties import parse_properties
from node.runtime.roles import build_process
from node.runtime.server_config import build_server_config

REPO = Path(__file__).resolve().parents[2]
SWITCH = re.compile(r'"([a-z]+(?:-[a-z0-9]+)+)" (?:not )?in [\w.]*bugs\b')


def node_sources() -> dict[Path, str]:
    return {p: p.read_text() for p in (REPO / "node").rglob("*.py") if p.name != "bugs.py"}


def test_at_least_twelve_complete_entries_across_the_whole_node() -> None:
    assert len(CATALOGUE) >= 12
    assert len(BY_NAME) == len(CATALOGUE), "names are unique"
    for bug in CATALOGUE:
        assert bug.component in COMPONENTS
        assert bug.name.split("-")[0] in ("raft", "ctl", "broker", "metadata", "storage")
        for field in (bug.rule, bug.reference, bug.guarantee, bug.defect):
            assert field.strip() and "\n" not in field, bug.name
    assert {b.component for b in CATALOGUE} == set(COMPONENTS)


def test_every_bug_has_a_switch_in_the_node_and_every_switch_names_a_bug() -> None:
    switched: dict[str, list[str]] = {}
    for path, text in node_sources().items():
        for name in SWITCH.findall(text):
            switched.setdefault(name, []).append(str(path.relative_to(REPO)))
    assert set(switched) <= set(BY_NAME), f"switches for unknown bugs: {set(switched) - set(BY_NAME)}"
    assert set(BY_NAME) <= set(switched), f"bugs without a switch: {set(BY_NAME) - set(switched)}"


def test_parse_accepts_lists_and_refuses_unknown_names() -> None:
    a, b = CATALOGUE[0].name, CATALOGUE[1].name
    assert parse_bugs(f" {a} , {b},") == Bugs(frozenset({a, b})) == parse_bugs([b, a])
    assert parse_bugs("") == parse_bugs(None) == parse_bugs("none") == NO_BUGS
    assert not NO_BUGS and len(parse_bugs(a)) == 1 and str(parse_bugs([b, a])) == ",".join(sorted((a, b)))
    with pytest.raises(UnknownBugError, match="unknown planted bug 'raft-typo' \\(known: "):
        parse_bugs(f"{a},raft-typo")
    with pytest.raises(UnknownBugError):
        _ = "raft-typo" in NO_BUGS  # a misspelt switch in the code fails loudly instead of never firing


def test_refusal_rule_and_warnings() -> None:
    bugs = parse_bugs([CATALOGUE[0].name, CATALOGUE[-1].name])
    assert refusal(NO_BUGS, test_cluster=False) is None
    assert refusal(bugs, test_cluster=True) is None
    problem = refusal(bugs, test_cluster=False)
    assert problem is not None and "kchaos.test.cluster=true" in problem and CATALOGUE[0].name in problem
    lines = warning_lines(bugs, node=3)
    assert len(lines) == 2 and all(line.startswith("node 3: PLANTED BUG ON: ") for line in lines)
    assert CATALOGUE[0].reference in lines[0] or CATALOGUE[0].reference in lines[1]


VOTER = """\
node.id=1
process.roles=controller
listeners=CONTROLLER://{host}:{port}
controller.listener.names=CONTROLLER
controller.quorum.voters=1@{host}:{port}
metadata.log.dir={data}
"""


def config_text(tmp_path: Path, extra: str = "", port: int = 9093, host: str = "127.0.0.1") -> str:
    return VOTER.format(host=host, port=port, data=tmp_path / "data") + extra


def build(text: str):
    return build_server_config(parse_properties(text, "server.properties"), "server.properties")


def test_server_properties_switch_reaches_every_component(tmp_path) -> None:
    name = "raft-leader-never-resigns"
    config = build(config_text(tmp_path, f"kchaos.bugs={name},ctl-read-without-barrier\nkchaos.test.cluster=true\n"))
    assert name in config.bugs and name in config.raft.bugs
    assert config.warnings == ()  # both keys are known
    assert build(config_text(tmp_path)).bugs == NO_BUGS
    raft = RaftNode(config.raft, LoadedState(None, (), None), random.Random(1))
    process = build_process(config, raft, random.Random(1))
    assert "ctl-read-without-barrier" in process.controller.config.bugs


def test_a_bug_outside_a_test_cluster_is_refused_naming_the_line(tmp_path) -> None:
    text = config_text(tmp_path, "kchaos.bugs=raft-vote-not-persisted\n")
    with pytest.raises(
        ConfigError, match=r"^server\.properties:7: kchaos\.bugs: planted bugs \(raft-vote-not-persisted\)"
    ):
        build(text)
    with pytest.raises(ConfigError, match=r"kchaos\.test\.cluster"):
        build(text + "kchaos.test.cluster=false\n")
    with pytest.raises(ConfigError, match=r"server\.properties:7: kchaos\.bugs: unknown planted bug 'nope'"):
        build(config_text(tmp_path, "kchaos.bugs=nope\nkchaos.test.cluster=true\n"))


def start_node(path: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "node.runtime", "node", "start", "--config", str(path)],
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )


def test_node_start_refuses_a_bug_in_a_production_looking_config_with_one_line(tmp_path) -> None:
    path = tmp_path / "server.properties"
    path.write_text(config_text(tmp_path, "kchaos.bugs=storage-flush-skips-fsync\n"))
    proc = start_node(path)
    try:
        _, stderr = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 254
    assert "Traceback" not in stderr
    errors = [line for line in stderr.splitlines() if "error" in line]
    assert len(errors) == 1 and errors[0].startswith(f"kchaos: error: {path}:7: kchaos.bugs: planted bugs")
    assert not (tmp_path / "data").exists(), "refused before touching the data dir"


def test_node_with_a_bug_in_a_test_cluster_logs_a_warning_per_bug(tmp_path) -> None:
    path = tmp_path / "server.properties"
    host, port = unused_address()
    names = "storage-flush-skips-fsync,raft-leader-never-resigns"
    path.write_text(config_text(tmp_path, f"kchaos.bugs={names}\nkchaos.test.cluster=true\n", port, host))
    proc = start_node(path)
    try:
        deadline = time.monotonic() + 60
        lines: list[str] = []
        while time.monotonic() < deadline and not any("starting as" in line for line in lines):
            line = proc.stderr.readline()
            if not line:
                break
            lines.append(line)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
    warnings = [line for line in lines if "WARNING" in line and "PLANTED BUG ON" in line]
    assert len(warnings) == 2, lines
    assert "raft-leader-never-resigns" in warnings[0] and "storage-flush-skips-fsync" in warnings[1]
