"""Nemesis options in a test file and on the command line: parsed, validated with one-line errors,
saved in test.json and read back."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from harness.cli import main
from harness.run_cli import _nemesis_options
from harness.test_spec import from_dict, load_test
from vocab.errors import EXIT_ERROR, UserError

FILE = """\
nemesis = ["clock", "kill", "disk_stall"]
nemesis_max_active = 2
nemesis_buggify = false

[nemesis_modes]
kill = ["leader", "minority"]

[nemesis_options.clock]
weight = 3
targets = ["leader"]
delta_ms = [-90000, 90000]

[nemesis_options.disk_stall]
ops = "fsync+write"
delay_ms = 250
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "t.toml"
    path.write_text(text)
    return path


def test_a_file_with_nemesis_options_resolves_and_round_trips(tmp_path):
    spec = load_test(write(tmp_path, FILE))
    assert spec.nemesis == ("clock", "kill", "disk_stall")
    assert spec.nemesis_max_active == 2 and spec.nemesis_buggify is False
    assert spec.nemesis_modes == {"kill": ("leader", "minority")}
    assert spec.nemesis_options == {
        "clock": {"weight": 3, "targets": ["leader"], "delta_ms": [-90000, 90000]},
        "disk_stall": {"ops": "fsync+write", "delay_ms": 250},
    }
    data = json.loads(json.dumps(spec.to_dict()))
    assert data["nemesis_options"]["clock"]["delta_ms"] == [-90000, 90000]
    assert from_dict(data) == spec
    assert load_test(write(tmp_path, spec.to_toml())) == spec


def test_flags_add_to_and_override_file_options(tmp_path):
    flags = {
        "nemesis_options": _nemesis_options(["clock.weight=5", "clock.rate=[0.5, 2.0]", "kill.weight=0"]),
        "nemesis_max_active": "3",
    }
    spec = load_test(write(tmp_path, FILE), flags)
    assert spec.nemesis_options["clock"] == {
        "weight": 5, "targets": ["leader"], "delta_ms": [-90000, 90000], "rate": [0.5, 2.0],
    }  # fmt: skip
    assert spec.nemesis_options["kill"] == {"weight": 0} and spec.nemesis_max_active == 3
    assert _nemesis_options(["disk_fail.errno=ENOSPC"]) == {"disk_fail": {"errno": "ENOSPC"}}


@pytest.mark.parametrize(
    ("text", "where", "problem"),
    [
        ("[nemesis_options.clock]\nrate = -1\n", ":9: nemesis_options.clock.rate", "must be >= 0.01"),
        ("[nemesis_options.clock]\nwarp = 1\n", ":9: nemesis_options.clock.warp", "unknown option for clock"),
        ('[nemesis_options.kill]\ntargets = ["leader"]\n', ":9: nemesis_options.kill.targets", "no separate targets"),
        ("[nemesis_options.pause]\nweight = 1\n", ":8: nemesis_options.pause", "not in the nemesis list"),
        ("[nemesis_options.meteor]\nweight = 1\n", ":8: nemesis_options.meteor", "unknown fault kind 'meteor'"),
        ('[nemesis_options]\nclock = {delta_ms = "x"}\n', ":9: nemesis_options.clock.delta_ms", "expected a number"),
        ('[nemesis_modes]\nclock = ["warp"]\n', ":9: nemesis_modes.clock", "unknown mode 'warp' for clock"),
    ],
)
def test_bad_options_in_a_file_are_one_line_naming_file_line_and_key(tmp_path, text, where, problem):
    base = 'nemesis = ["clock", "kill", "disk_stall"]\n' + "\n" * 6
    path = write(tmp_path, base + text)
    with pytest.raises(UserError) as err:
        load_test(path)
    message = str(err.value)
    assert "\n" not in message
    assert re.match(rf"^{re.escape(str(path))}{re.escape(where)}: .*{re.escape(problem)}", message), message


@pytest.mark.parametrize(
    ("argv", "problem"),
    [
        (["--nemesis-option", "clock"], "--nemesis-option 'clock': expected KIND.KEY=VALUE"),
        (["--nemesis-option", "clock.delta_ms=soon"], "--nemesis-option clock.delta_ms: expected a number"),
        (["--nemesis", "kill", "--nemesis-option", "clock.weight=2"], "options for 'clock', which is not in"),
        (["--nemesis-max-active", "-1"], "--nemesis-max-active: must be >= 0"),
        (["--nemesis", "kill,meteor"], "--nemesis: unknown fault kind 'meteor'"),
    ],
)
def test_bad_flags_are_one_line_and_exit_254(tmp_path, capsys, argv, problem):
    code = main(["run", "--backend", "sim", "--results", str(tmp_path), *argv])
    err = capsys.readouterr().err
    assert code == EXIT_ERROR
    assert problem in err and err.count("\n") == 1 and "Traceback" not in err
    assert not any(tmp_path.iterdir())  # nothing ran
