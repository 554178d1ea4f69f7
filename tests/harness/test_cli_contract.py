"""The `kchaos` contract: every bad flag, argument or command is one line and exit 254; `--help` and the
light commands start without pandas, Spark, matplotlib or the simulator."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from harness.cli import COMMANDS, main
from vocab.errors import EXIT_ERROR

HEAVY = ("pandas", "pyspark", "matplotlib", "node.sim.world", "harness.runner")


def modules_after(code: str, expect_exit: int = 0) -> set[str]:
    """The modules a fresh interpreter holds after running `code` (which may exit), which must end
    with `expect_exit`: a command that crashed early would otherwise look light."""
    probe = f"""
import atexit, json, sys
atexit.register(lambda: print(json.dumps(sorted(sys.modules)), file=sys.__stderr__))
{code}
"""
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert proc.returncode == expect_exit, (code, proc.returncode, proc.stderr[-2000:])
    return set(json.loads(proc.stderr.strip().splitlines()[-1]))


def test_importing_the_cli_pulls_in_nothing_heavy() -> None:
    loaded = modules_after("import harness.cli")
    assert not loaded & set(HEAVY), sorted(loaded & set(HEAVY))


@pytest.mark.parametrize("argv", [["--help"], ["admin", "--help"], ["run", "--help"], ["bugs", "--list"]])
def test_light_commands_start_without_heavy_libraries(argv: list[str]) -> None:
    loaded = modules_after(f"from harness.cli import main; sys.exit(main({argv!r}))")
    assert not loaded & set(HEAVY), (argv, sorted(loaded & set(HEAVY)))


def test_help_lists_every_command_and_every_command_has_its_own_help(capsys) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["--help"])
    assert caught.value.code == 0
    listing = " ".join(capsys.readouterr().out.split())  # argparse wraps the summaries
    for name, spec in COMMANDS.items():
        assert f"{name} {spec.summary}" in listing, name
        with pytest.raises(SystemExit) as caught:
            main([name, "--help"])
        assert caught.value.code == 0, name
        assert f"usage: kchaos {name}" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "starts"),
    [
        ([], "kchaos: error: a command is required"),
        (["--nosuch"], "kchaos: error: unrecognized arguments: --nosuch"),
        (["nosuch"], "kchaos: error: argument COMMAND: invalid choice: 'nosuch'"),
        (["run", "--nosuch"], "kchaos run: error: unrecognized arguments: --nosuch"),
        (["sim", "--nosuch"], "kchaos sim: error: unrecognized arguments: --nosuch"),
        (["run", "--backend", "nosuch"], "kchaos run: error: argument --backend: invalid choice: 'nosuch'"),
        (["check"], "kchaos check: error: the following arguments are required: history"),
        (["node"], "kchaos node: error: the following arguments are required: ACTION"),
        (["results"], "kchaos results: error: the following arguments are required: ACTION"),
        (["admin"], "kchaos admin: error: the following arguments are required: TOOL"),
    ],
)
def test_bad_input_is_one_line_and_exit_254(argv: list[str], starts: str, capsys) -> None:
    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code
    assert code == EXIT_ERROR, argv
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(starts), captured.err
    assert captured.out == ""
