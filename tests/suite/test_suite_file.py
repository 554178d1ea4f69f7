"""Suite files: the matrix expands into cells, [[cell]] overrides and skips apply to the cells they
match, every cell resolves to a test before anything runs, and bad input is one line naming where."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.suite import load_suite
from vocab.errors import UserError

SUITE = """\
name = "small"
budget = "2m"
jobs = 3
run_timeout = "90s"
seeds = [3, 5]

[defaults]
time_limit_s = 8
rate = 40

[matrix]
workloads = ["config-register", "config-append"]
nemeses = { mixed = ["partition", "kill"], calm = [] }
clusters = ["3+2", "3"]
backends = ["sim"]

[[cell]]
match = { nemesis = "mixed", cluster = "3" }
nemesis_modes = { kill = ["leader"] }
time_limit_s = 12

[[cell]]
match = { workload = "config-append", nemesis = "calm" }
skip = true
"""


def write(tmp_path: Path, text: str, name: str = "suite.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_the_matrix_expands_with_overrides_and_skips(tmp_path) -> None:
    suite = load_suite(write(tmp_path, SUITE), bugs=["raft-vote-not-persisted"])
    ids = [c.id for c in suite.cells]
    assert ids == [
        "config-register/mixed/3+2/sim",
        "config-register/mixed/3/sim",
        "config-register/calm/3+2/sim",
        "config-register/calm/3/sim",
        "config-append/mixed/3+2/sim",
        "config-append/mixed/3/sim",
    ]  # config-append x calm skipped
    assert (suite.name, suite.budget_s, suite.jobs, suite.run_timeout_s, suite.seeds) == ("small", 120, 3, 90, (3, 5))
    assert [(c.id, s) for c, s in suite.runs()][:2] == [(ids[0], 3), (ids[1], 3)]  # seed outermost
    assert len(suite.runs()) == 12
    plain = suite.spec(suite.cells[0], 3)
    assert (plain.workload, plain.nemesis, plain.seed, plain.time_limit_s, plain.rate) == (
        "config-register", ("partition", "kill"), 3, 8.0, 40.0,
    )  # fmt: skip
    assert (plain.cluster.controllers, plain.cluster.brokers, plain.name) == (3, 2, "config-register.mixed.3+2.sim")
    assert plain.bugs == ("raft-vote-not-persisted",) and plain.nemesis_modes == {}
    leader = suite.spec(suite.cells[1], 5)
    assert leader.cluster.combined == 3 and leader.time_limit_s == 12.0
    assert leader.nemesis_modes == {"kill": ("leader",)}
    assert suite.spec(suite.cells[2], 3).nemesis == ()


def test_seeds_from_the_command_line_and_the_shipped_suites_load(tmp_path) -> None:
    assert load_suite(write(tmp_path, SUITE), seeds=4).seeds == (1, 2, 3, 4)
    assert load_suite(write(tmp_path, SUITE), seeds="501..503").seeds == (501, 502, 503)
    ranged = load_suite(write(tmp_path, SUITE.replace("seeds = [3, 5]", 'seeds = "7..9"')))
    assert ranged.seeds == (7, 8, 9) and len(ranged.runs()) == 18
    root = Path(__file__).resolve().parents[2] / "suites"
    gate = load_suite(root / "gate.toml")
    assert {c.workload for c in gate.cells} == {"config-append", "config-register", "isr-changes", "registrations"}
    assert all(c.backend == "sim" for c in gate.cells) and gate.budget_s is not None and gate.budget_s < 600


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (("seeds = [3, 5]", "seeds = 0"), "suite.toml:5: seeds: must be >= 1, got 0"),
        (("seeds = [3, 5]", 'seeds = "9..7"'), "suite.toml:5: seeds: the range '9..7' is empty"),
        # kchaos fuzz (seed 30001, input 2598293): a count too large for `range` was a traceback
        (("seeds = [3, 5]", "seeds = 99999999999999999999"), "seeds: at most 1,000,000 seeds per cell, got 99,999"),
        (("seeds = [3, 5]", "seeds = 1000001"), "suite.toml:5: seeds: at most 1,000,000 seeds per cell, got 1,000,001"),
        (("seeds = [3, 5]", 'seeds = "5..99999999999999999999"'), "seeds: at most 1,000,000 seeds per cell"),
        (("seeds = [3, 5]", 'seeds = "some"'), "seeds: expected a count of seeds, a list of seeds or a range"),
        (('budget = "2m"', 'budget = "soon"'), "suite.toml:2: budget: expected a duration"),
        (("rate = 40", "rate = -1"), "suite.toml:9: defaults.rate: must be a number >= 0"),
        (("rate = 40", "colour = 1"), "suite.toml:9: defaults.colour: unknown key"),
        (("time_limit_s = 8\n", "seed = 8\n"), "suite.toml:8: defaults.seed: set by the suite"),
        (('"config-append"]', '"nope"]'), "suite.toml:12: matrix.workloads: unknown workload 'nope'"),
        (("calm = []", 'calm = ["meteor"]'), "matrix.nemeses.calm: unknown fault kind 'meteor'"),
        (('clusters = ["3+2", "3"]', 'clusters = ["three"]'), "matrix.clusters: expected N (combined nodes) or C+B"),
        (('backends = ["sim"]', 'backends = ["cloud"]'), "matrix.backends: unknown backend 'cloud'"),
        (('match = { nemesis = "mixed", cluster = "3" }', 'match = { nemesis = "wild" }'), "cell[1].match.nemesis"),
        (('match = { nemesis = "mixed", cluster = "3" }', 'match = { flavour = "x" }'), "unknown dimension"),
        (("time_limit_s = 12", 'time_limit_s = "forever"'), "[[cell]] for config-register/mixed/3/sim"),
        (("time_limit_s = 12", "seed = 1"), "cell[1].seed: a dimension or the seed"),
        (("jobs = 3", "jobs = 3\nflavour = 1"), "suite.toml:4: flavour: unknown key"),
        (("[[cell]]\nmatch = { workload", "[cell]\nmatch = { workload"), "invalid TOML"),
    ],
)
def test_bad_suite_files_are_one_line_naming_where(tmp_path, change, message) -> None:
    old, new = change
    assert old in SUITE, old
    path = write(tmp_path, SUITE.replace(old, new, 1))
    with pytest.raises(UserError) as caught:
        load_suite(path)
    text = str(caught.value)
    assert message in text and "\n" not in text, text
    assert str(path) in text


def test_every_cell_skipped_and_a_missing_file_are_refused(tmp_path) -> None:
    text = SUITE + "\n[[cell]]\nmatch = {}\nskip = true\n"
    with pytest.raises(UserError, match="every cell of the matrix is skipped"):
        load_suite(write(tmp_path, text))
    with pytest.raises(UserError, match="cannot read suite file"):
        load_suite(tmp_path / "missing.toml")
    with pytest.raises(UserError, match="unknown planted bug"):
        load_suite(write(tmp_path, SUITE), bugs=["nope"])


def test_the_nightly_suite_uses_netns_and_every_real_fault() -> None:
    """suites/nightly.toml is for the nightly machine (root, netns): here it is loaded and checked,
    not run. Every workload, every fault kind netns carries out, all on netns, within one night."""
    from harness.gate import gate_config
    from harness.plugins import workload_names
    from vocab.faults.kinds import BACKEND_FAULTS

    root = Path(__file__).resolve().parents[2] / "suites"
    nightly = load_suite(root / "nightly.toml")
    assert {c.backend for c in nightly.cells} == {"netns"}
    assert {k for c in nightly.cells for k in c.kinds} == BACKEND_FAULTS["netns"]
    assert {c.workload for c in nightly.cells} == set(workload_names("kraft"))  # the reference cluster's
    assert nightly.budget_s is not None and nightly.budget_s <= 8 * 3600 and nightly.jobs == 1
    planned = sum(nightly.spec(c, s).time_limit_s + nightly.spec(c, s).recovery_s for c, s in nightly.runs())
    assert planned <= nightly.budget_s  # the runs' own phases fit the budget
    kill = next(c for c in nightly.cells if c.nemesis == "kill")
    assert "leader" in nightly.spec(kill, 1).nemesis_modes["kill"]  # failover is measured on leader kills
    limits = gate_config(nightly.gate, nightly.where)
    assert limits.for_cell(kill)["failover_s"] > 0


def test_the_soaks_cover_every_workload_under_every_fault_kind_of_their_backend() -> None:
    """suites/soak.toml (the simulator) and suites/soak-netns.toml (real processes): every kraft
    workload under all of its backend's fault kinds at once; the real one's runs within its budget."""
    from harness.plugins import workload_names
    from vocab.faults.kinds import BACKEND_FAULTS

    root = Path(__file__).resolve().parents[2] / "suites"
    for name, backend in (("soak.toml", "sim"), ("soak-netns.toml", "netns")):
        soak = load_suite(root / name)
        assert {c.backend for c in soak.cells} == {backend}
        assert [set(c.kinds) for c in soak.cells] == [set(BACKEND_FAULTS[backend])] * len(soak.cells)
        assert {c.workload for c in soak.cells} == set(workload_names("kraft"))
        assert soak.budget_s is not None
    planned = sum(soak.spec(c, s).time_limit_s + soak.spec(c, s).recovery_s for c, s in soak.runs())
    assert planned <= soak.budget_s and soak.jobs == 1  # real seconds, one cluster at a time


def test_a_fault_kind_the_backend_cannot_carry_out_is_refused(tmp_path, monkeypatch) -> None:
    import vocab.faults.catalogue

    monkeypatch.setattr(
        vocab.faults.catalogue, "backend_support", lambda names: {n: frozenset({"kill"}) for n in names}
    )
    with pytest.raises(UserError, match=r"matrix.nemeses.mixed: the sim backend cannot carry out partition"):
        load_suite(write(tmp_path, SUITE))


def test_preflight_refuses_what_every_run_would_fail_on(tmp_path, monkeypatch) -> None:
    from harness.suite import preflight

    nightly = load_suite(Path(__file__).resolve().parents[2] / "suites" / "nightly.toml")
    preflight(load_suite(write(tmp_path, SUITE)))  # sim: nothing needed
    monkeypatch.setattr("os.geteuid", lambda: 1000)
    with pytest.raises(
        UserError, match=r"nightly.toml: cell config-append/partition/3\+2/netns: the netns backend needs root"
    ):
        preflight(nightly)
    preflight(load_suite(write(tmp_path, SUITE)))
    ssh = write(tmp_path, SUITE.replace('backends = ["sim"]', 'backends = ["ssh"]'), "ssh.toml")
    with pytest.raises(UserError, match="the ssh backend needs inventory"):
        preflight(load_suite(ssh))
