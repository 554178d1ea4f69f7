"""The fault catalogue: complete, self-consistent, validated options, and `kchaos nemeses` prints it."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest

from harness.backends.docker import DockerBackend
from harness.backends.netns import NetnsBackend
from harness.backends.sim import SimBackend
from harness.backends.ssh import SshBackend
from harness.cli import main
from vocab.faults.catalogue import CATALOGUE, HEAL_ORDER, KIND_COLORS, TARGET_MODES, TARGETS_DOC, check_option
from vocab.faults.kinds import FAULT_KINDS
from vocab.faults.options import all_options, kind_options

REPO = Path(__file__).resolve().parents[2]


def test_every_fault_kind_is_in_the_catalogue_in_vocabulary_order():
    assert tuple(CATALOGUE) == FAULT_KINDS
    assert set(FAULT_KINDS) < set(HEAL_ORDER)
    assert set(TARGETS_DOC) == set(TARGET_MODES)


def test_issue_12_modes_are_there():
    assert set(CATALOGUE["partition"].modes) == {
        "random-halves", "isolate-one", "isolate-leader", "majorities-ring", "bridge", "one-way",
        "controllers-from-brokers", "isolate-each-controller", "leader-from-controllers",
    }  # fmt: skip
    for kind in ("kill", "pause"):
        assert {"one", "leader", "minority", "majority", "all"} <= set(CATALOGUE[kind].default_modes)
    assert set(CATALOGUE["clock"].modes) == {"bump", "strobe", "rate", "reset"}
    assert set(CATALOGUE["corrupt"].modes) == {"bitflip-log", "truncate-log", "bitflip-snapshot", "truncate-snapshot"}
    assert {"all", "one", "leader", "minority"} <= set(CATALOGUE["packet"].modes)


@pytest.mark.parametrize("kind", FAULT_KINDS)
def test_defaults_are_valid_and_draw_valid_values(kind):
    spec = CATALOGUE[kind]
    assert set(spec.default_modes) <= set(spec.modes) and set(spec.default_targets) <= set(spec.targets)
    for param in spec.params:
        assert set(param.modes) <= set(spec.modes)
        for value in param.default if isinstance(param.default, tuple) else (param.default,):
            assert param.check(value) is None, (param.name, value)
    opts = kind_options(kind)
    rng = random.Random(1)
    for mode in spec.modes:
        for name, value in opts.draw_params(mode, rng).items():
            assert spec.param(name).check(value) is None
            assert not spec.param(name).modes or mode in spec.param(name).modes


@pytest.mark.parametrize(
    ("kind", "key", "value", "problem"),
    [
        ("clock", "delta_ms", "soon", "expected a number"),
        ("clock", "rate", 0, "must be >= 0.01"),
        ("clock", "targets", ["leader", "boss"], "unknown target 'boss' for clock"),
        ("kill", "targets", ["leader"], "kill has no separate targets"),
        ("kill", "modes", ["everyone"], "unknown mode 'everyone' for kill"),
        ("kill", "weight", -1, "expected a number >= 0"),
        ("packet", "loss", 1.5, "must be <= 1"),
        ("packet", "loss", [], "non-empty list"),
        ("disk_fail", "errno", "EPERM", "expected one of EIO, ENOSPC"),
        ("disk_stall", "ops", "read", "expected one of fsync, write, fsync+write"),
        ("disk_stall", "delay_ms", 1.5, "expected an integer"),
        ("pause", "delay_ms", 5, "unknown option for pause (known: weight, modes)"),
    ],
)
def test_bad_options_are_named(kind, key, value, problem):
    assert problem in (check_option(kind, key, value) or "")


def test_options_merge_file_values_over_modes_over_defaults():
    opts = all_options(
        ["clock", "kill"],
        {"kill": ["leader"]},
        {"clock": {"weight": 3, "targets": ["all"], "delta_ms": [-5, 5], "rate": 2}},
    )
    assert opts["kill"].modes == ("leader",) and opts["kill"].weight == 1.0
    clock = opts["clock"]
    assert clock.weight == 3.0 and clock.targets == ("all",) and clock.modes == CATALOGUE["clock"].default_modes
    assert clock.params["delta_ms"] == (-5, 5) and clock.params["rate"] == 2.0
    draws = {clock.draw_params("bump", random.Random(i))["delta_ms"] for i in range(40)}
    assert draws == {-5, 5}
    assert clock.draw_params("rate", random.Random(0)) == {"rate": 2.0}


def test_colours_are_one_per_kind_and_the_viewer_uses_the_same():
    assert set(FAULT_KINDS) | {"buggify"} == set(KIND_COLORS)
    assert len(set(KIND_COLORS.values())) == len(KIND_COLORS)
    template = (REPO / "checkers" / "viewer_template.html").read_text()
    js = re.search(r"const FAULT_COLORS = \{(.*?)\};", template, re.S)
    assert js is not None
    assert dict(re.findall(r'(\w+): "(#[0-9a-f]{6})"', js.group(1))) == KIND_COLORS


def test_kchaos_nemeses_prints_every_kind_with_modes_parameters_and_backends(capsys):
    assert main(["nemeses"]) == 0
    out = capsys.readouterr().out
    blocks = {b.split(" — ")[0]: b for b in out.split("\n\n") if " — " in b}
    assert set(FAULT_KINDS) | {"buggify"} <= set(blocks)
    assert "isolate-each-controller" in blocks["partition"] and "majorities-ring" in blocks["partition"]
    assert "delta_ms [bump, strobe]" in blocks["clock"] and "rate [rate]" in blocks["clock"]
    assert "loss:" in blocks["packet"] and "jitter_ms" in blocks["packet"]
    for kind in FAULT_KINDS:  # read from each backend class's `faults`
        backends = re.search(r"backends:\s+(.*)", blocks[kind]).group(1)
        assert ("sim" in backends) == (kind in SimBackend.faults), kind
        assert ("netns" in backends) == (kind in NetnsBackend.faults), kind
        assert ("docker" in backends) == (kind in DockerBackend.faults), kind
        assert ("ssh" in backends) == (kind in SshBackend.faults), kind
    assert "vote-granted" in blocks["buggify"]


def test_kchaos_nemeses_json_and_run_list_nemeses(capsys):
    assert main(["nemeses", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    by_kind = {d["kind"]: d for d in data}
    assert list(by_kind)[: len(FAULT_KINDS)] == list(FAULT_KINDS)
    assert by_kind["clock"]["backends"] == sorted(
        b
        for b, cls in (("sim", SimBackend), ("netns", NetnsBackend), ("docker", DockerBackend), ("ssh", SshBackend))
        if "clock" in cls.faults
    )
    assert by_kind["pause"]["mechanism"]["docker"].startswith("docker pause")
    assert by_kind["partition"]["mechanism"]["docker"].startswith("as netns")
    delta = next(p for p in by_kind["clock"]["params"] if p["name"] == "delta_ms")
    assert delta["unit"] == "ms" and delta["modes"] == ["bump", "strobe"] and -60_000 in delta["default"]
    assert main(["run", "--list-nemeses"]) == 0
    assert capsys.readouterr().out.startswith("Fault kinds")
