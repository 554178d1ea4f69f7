"""The test model: TOML files, flags over files, test.json, and one-line errors for bad input."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import reports.schema
from harness.test_spec import Cluster, Registries, TestSpec, from_dict, load_test
from vocab.errors import UserError

GOOD = """\
name = "reg-partition"
backend = "netns"
nemesis = ["partition", "kill"]
nemesis_interval_s = "5s"
nemesis_duration_s = 2.5
nemesis_draw = "deck"
time_limit_s = "2m"
concurrency = 8
rate = 120
seed = 42
leave_db_running = true
recovery_s = "500ms"
recovery_tail_s = "200ms"
ready_timeout_s = "5m"
final_reads = false

[cluster]
controllers = 3
brokers = 2

[workload_options]
keys = 4
topics = ["t1", "t2"]

[nemesis_modes]
partition = ["isolate-leader"]
"""


def write(tmp_path: Path, text: str, name: str = "test.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_a_valid_file_resolves_every_field(tmp_path):
    spec = load_test(write(tmp_path, GOOD), {})
    assert spec == TestSpec(
        name="reg-partition",
        seed=42,
        backend="netns",
        cluster=Cluster(controllers=3, brokers=2),
        workload_options={"keys": 4, "topics": ["t1", "t2"]},
        nemesis=("partition", "kill"),
        nemesis_interval_s=5.0,
        nemesis_duration_s=2.5,
        nemesis_draw="deck",
        nemesis_modes={"partition": ("isolate-leader",)},
        time_limit_s=120.0,
        concurrency=8,
        rate=120.0,
        leave_db_running=True,
        recovery_s=0.5,
        recovery_tail_s=0.2,
        ready_timeout_s=300.0,
        final_reads=False,
    )
    assert spec.nodes == ["c1", "c2", "c3", "b1", "b2"]


def test_defaults_without_a_file_and_a_random_seed_is_chosen():
    spec = load_test(None, {})
    assert (spec.backend, spec.sut, spec.workload) == ("sim", "kraft", "config-register")
    assert spec.cluster == Cluster(combined=3)
    assert spec.name == "config-register-kill+partition"
    assert isinstance(spec.seed, int) and spec.seed >= 0


def test_flags_win_over_the_file(tmp_path):
    flags = {
        "backend": "sim",
        "nodes": "5",
        "nemesis": "kill",
        "time_limit_s": "30",
        "concurrency": 2,
        "rate": "10.5",
        "seed": "7",
        "test_count": 3,
        "leave_db_running": None,  # not given: the file's value stays
        "workload_options": {"keys": "9"},
    }
    spec = load_test(write(tmp_path, GOOD.replace('partition = ["isolate-leader"]', "")), flags)
    assert (spec.backend, spec.cluster, spec.nemesis) == ("sim", Cluster(combined=5), ("kill",))
    assert (spec.time_limit_s, spec.concurrency, spec.rate, spec.seed, spec.test_count) == (30.0, 2, 10.5, 7, 3)
    assert spec.leave_db_running is True
    assert spec.workload_options == {"keys": "9", "topics": ["t1", "t2"]}


@pytest.mark.parametrize(
    ("nodes", "cluster"),
    [("3+2", Cluster(3, 2, 0)), ("controllers=3,brokers=1", Cluster(3, 1, 0)), ("combined=5", Cluster(0, 0, 5))],
)
def test_nodes_flag_forms(nodes, cluster):
    assert load_test(None, {"nodes": nodes}).cluster == cluster


def test_test_json_matches_the_results_schema_and_round_trips(tmp_path):
    spec = load_test(write(tmp_path, GOOD), {})
    data = json.loads(json.dumps(spec.to_dict(started_at="2026-11-23T10:15:00Z")))
    assert data["schema_version"] == 1 == reports.schema.SCHEMA_VERSION
    for key in ("name", "workload", "backend", "seed", "time_limit_s", "concurrency", "rate", "started_at"):
        assert key in data
    assert data["nemesis"] == ["partition", "kill"]
    assert data["nodes"] == ["c1", "c2", "c3", "b1", "b2"]
    assert data["ready_timeout_s"] == 300.0 and data["nemesis_draw"] == "deck" and data["recovery_tail_s"] == 0.2
    assert from_dict(data) == spec
    assert load_test(write(tmp_path, spec.to_toml(), "again.toml"), {}) == spec
    optional = {"ready_timeout_s", "nemesis_draw", "recovery_tail_s"}
    assert not optional & set(load_test(None, {}).to_dict())  # defaults: absent, as before


def test_a_none_nemesis_is_an_empty_list():
    spec = load_test(None, {"nemesis": "none"})
    assert spec.nemesis == () and spec.name == "config-register-none"
    assert spec.to_dict()["nemesis"] == []


def test_registries_passed_in_decide_the_allowed_names():
    reg = Registries(backends=("sim",), workloads=("config-register", "set"), nemeses=("kill",))
    assert load_test(None, {"workload": "set", "nemesis": "kill"}, reg).workload == "set"
    with pytest.raises(UserError, match=r"--backend: unknown backend 'netns' \(choose from sim\)"):
        load_test(None, {"backend": "netns"}, reg)


BAD_FILES = [
    ('colour = "red"\n', r"^{f}:1: colour: unknown key \(known keys: name, "),
    ("concurrency = 2.5\n", r"^{f}:1: concurrency: expected an integer, got float 2.5$"),
    ('concurrency = "many"\n', r"^{f}:1: concurrency: expected an integer, got string 'many'$"),
    ("concurrency = 0\n", r"^{f}:1: concurrency: must be >= 1, got 0$"),
    # kchaos fuzz's numbers: 10**20 clients hung the run while it built them
    ("concurrency = 99999999999999999999\n", r"^{f}:1: concurrency: must be <= 10,000, got 99,999,999,999"),
    ("\n\ntime_limit_s = -5\n", r"^{f}:3: time_limit_s: must be > 0, got -5$"),
    ('time_limit_s = "5 parsecs"\n', r"^{f}:1: time_limit_s: expected a duration like 30, 30s, 500ms or 2m, got"),
    ("recovery_s = true\n", r"^{f}:1: recovery_s: expected a duration in seconds, got boolean True$"),
    ('ready_timeout_s = "0s"\n', r"^{f}:1: ready_timeout_s: must be > 0, got '0s'$"),
    ("recovery_tail_s = 0\n", r"^{f}:1: recovery_tail_s: must be > 0, got 0$"),
    ('nemesis_draw = "shuffle"\n', r"^{f}:1: nemesis_draw: unknown nemesis draw 'shuffle' \(choose from deck, rand"),
    ("rate = -1\n", r"^{f}:1: rate: must be a number >= 0, got -1$"),
    (
        'backend = "kubernetes"\n',
        r"^{f}:1: backend: unknown backend 'kubernetes' \(choose from docker, netns, sim, ssh\)$",
    ),
    (
        'workload = "bank"\n',
        r"^{f}:1: workload: unknown workload 'bank' \(choose from [a-z, -]*config-register[a-z, -]*\)$",
    ),
    ('sut = "zookeeper"\n', r"^{f}:1: sut: unknown system-under-test adapter 'zookeeper'"),
    ('nemesis = ["partition", "meteor"]\n', r"^{f}:1: nemesis: unknown fault kind 'meteor' \(choose from "),
    ("nemesis = 3\n", r"^{f}:1: nemesis: expected a list of fault kinds, got integer 3$"),
    ("leave_db_running = 1\n", r"^{f}:1: leave_db_running: expected true or false, got integer 1$"),
    ('name = "../escape"\n', r"^{f}:1: name: a test name is 1-100 letters"),
    ("seed = -1\n", r"^{f}:1: seed: must be >= 0, got -1$"),
    ("[cluster]\ncontrollers = 0\n", r"^{f}: cluster: needs at least one controller or combined node$"),
    ("[cluster]\nvoters = 3\n", r"^{f}:2: cluster.voters: unknown key 'voters'"),
    ("[cluster]\nbrokers = -2\n", r"^{f}:2: cluster.brokers: must be >= 0, got -2$"),
    ('cluster = "big"\n', r"^{f}:1: cluster: expected a table, got string 'big'$"),
    ('[nemesis_modes]\npause = ["all"]\n', r"^{f}:2: nemesis_modes.pause: modes for 'pause', which is not in"),
    ("[nemesis_modes]\npartition = []\n", r"^{f}:2: nemesis_modes.partition: expected a non-empty list"),
    ("concurrency = \n", r"^{f}:1:\d+: invalid TOML: Invalid value$"),
    ('x = "unterminated\n', r"^{f}:1:\d+: invalid TOML: "),
]


@pytest.mark.parametrize(("text", "pattern"), BAD_FILES)
def test_bad_files_give_one_line_naming_file_line_and_key(tmp_path, text, pattern):
    path = write(tmp_path, text)
    with pytest.raises(UserError) as info:
        load_test(path, {})
    message = str(info.value)
    assert "\n" not in message
    assert re.search(pattern.format(f=re.escape(str(path))), message), message


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        ({"time_limit_s": "-3"}, "--time-limit: expected a duration like 30, 30s, 500ms or 2m, got '-3'"),
        ({"time_limit_s": 0}, "--time-limit: must be > 0, got 0"),
        ({"concurrency": "x"}, "--concurrency: expected an integer, got string 'x'"),
        ({"nodes": "lots"}, "--nodes: expected N (combined nodes), C+B (controllers+brokers)"),
        ({"nodes": "0+3"}, "--nodes: needs at least one controller or combined node"),
        ({"nemesis": "kill,flood"}, "--nemesis: unknown fault kind 'flood'"),
        ({"backend": "vagrant"}, "--backend: unknown backend 'vagrant'"),
        ({"seed": "1.5"}, "--seed: expected an integer, got string '1.5'"),
        ({"warp": 9}, "--warp: unknown option"),
    ],
)
def test_bad_flags_name_the_flag(flags, message):
    with pytest.raises(UserError) as info:
        load_test(None, flags)
    assert str(info.value).startswith(message)
    assert "\n" not in str(info.value)


def test_unreadable_files(tmp_path):
    with pytest.raises(UserError, match=r"missing\.toml: cannot read test file: No such file"):
        load_test(tmp_path / "missing.toml", {})
    binary = tmp_path / "bin.toml"
    binary.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(UserError, match=r"bin\.toml: not a UTF-8 text file"):
        load_test(binary, {})


def test_a_runs_test_json_is_a_test_file_and_flags_win_over_it(tmp_path):
    spec = load_test(write(tmp_path, GOOD), {})
    stored = tmp_path / "test.json"
    stored.write_text(json.dumps(spec.to_dict(started_at="2026-11-29T10:00:00Z")))
    assert load_test(stored, {}) == spec
    again = load_test(stored, {"seed": 7, "time_limit_s": "30s"})
    assert (again.seed, again.time_limit_s, again.cluster, again.nemesis) == (7, 30.0, spec.cluster, spec.nemesis)


@pytest.mark.parametrize(
    ("text", "pattern"),
    [
        ('{"name": "x",\n  "rate": }', r"test\.json:2:11: invalid JSON: Expecting value$"),
        ('["name"]', r"test\.json: a test\.json holds one JSON object, not list$"),
        ('{"name": "x", "concurrency": 0}', r"test\.json: concurrency: must be >= 1, got 0$"),
        ('{"name": "x", "bogus": 1}', r"test\.json: bogus: unknown key"),
    ],
)
def test_a_bad_test_json_gives_one_line_naming_it(tmp_path, text, pattern):
    stored = tmp_path / "test.json"
    stored.write_text(text)
    with pytest.raises(UserError, match=pattern) as err:
        load_test(stored, {})
    assert "\n" not in str(err.value)


def test_from_dict_validates_a_stored_test_json():
    with pytest.raises(UserError, match=r"^runs/x/test.json: concurrency: must be >= 1, got 0$"):
        from_dict({"schema_version": 1, "name": "x", "concurrency": 0}, "runs/x/test.json")


def test_the_run_command_offers_every_backend_a_test_file_may_name() -> None:
    from harness import run_cli, test_spec

    assert run_cli.BACKENDS == test_spec.BACKENDS


SETTINGS = """\
backend = "netns"

[sut_settings]
"controller.quorum.fetch.timeout.ms" = 1700
"controller.quorum.election.timeout.ms" = "900"
"allow.everyone.if.no.acl.found" = false
"""


def test_sut_settings_come_as_text_flags_win_and_they_round_trip_through_test_json(tmp_path):
    path = write(tmp_path, SETTINGS)
    spec = load_test(path, {"sut_settings": {"controller.quorum.election.timeout.ms": "1100"}})
    assert spec.sut_settings == {
        "controller.quorum.fetch.timeout.ms": "1700",
        "controller.quorum.election.timeout.ms": "1100",
        "allow.everyone.if.no.acl.found": "false",
    }
    data = json.loads(json.dumps(spec.to_dict()))
    assert data["sut_settings"] == spec.sut_settings and from_dict(data) == spec
    assert load_test(write(tmp_path, spec.to_toml(), "again.toml"), {}) == spec
    assert "sut_settings" not in load_test(None, {"backend": "netns"}).to_dict()  # none: absent


def test_sut_settings_reach_every_adapters_nodes():
    from harness.db import make_db

    kraft = make_db("kraft", load_test(None, {"backend": "netns", "sut_settings": {"super.users": "User:x"}}))
    assert kraft.settings["super.users"] == "User:x"  # on top of the harness's own (it sets super.users too)
    kafka = load_test(None, {"backend": "netns", "sut": "kafka", "sut_settings": {"log.flush.interval.messages": "1"}})
    assert make_db("kafka", kafka).settings == {"log.flush.interval.messages": "1"}
    etcd = make_db(
        "etcd",
        load_test(
            None,
            {"backend": "netns", "sut": "etcd", "workload": "register", "sut_settings": {"heartbeat-interval": "50"}},
        ),
    )
    assert etcd.settings["heartbeat-interval"] == "50"  # each a --flag=value of every member (EtcdDB.flags)


@pytest.mark.parametrize(
    ("text", "flags", "message"),
    [
        ('[sut_settings]\n"a b" = 1\n', {}, "{f}:3: sut_settings.a b: expected a setting name of letters"),
        ("[sut_settings]\nx = [1, 2]\n", {}, "{f}:3: sut_settings.x: expected a string, number or boolean on one line"),
        ('sut_settings = "x=1"\n', {}, "{f}:2: sut_settings: expected a table, got string"),
        (
            '[sut_settings]\n"log.flush.interval.messages" = 1\n',
            {},
            "{f}: sut_settings: 'log.flush.interval.messages' is not a setting the reference cluster's nodes know",
        ),
        (
            '[sut_settings]\n"controller.quorum.fetch.timeout.ms" = "soon"\n',
            {},
            "{f}: sut_settings: controller.quorum.fetch.timeout.ms: 'soon' is not an integer",
        ),
        ('[sut_settings]\n"kchaos.bugs" = "x"\n', {}, "{f}: sut_settings: planted bugs are switched on with --bug"),
        (
            "",
            {"backend": "sim", "sut_settings": {"super.users": "User:x"}},
            "--sut-setting: 'super.users' has no meaning on the simulator",
        ),
        ('[sut_settings]\n"num.partitions" = 0\n', {}, "{f}: sut_settings: num.partitions: 0 must be at least 1"),
        (  # on top of the harness's own 500 ms heartbeat: checked before the nodes start, not by their exit
            '[sut_settings]\n"broker.session.timeout.ms" = 400\n',
            {},
            "{f}: sut_settings: broker.heartbeat.interval.ms (500) must be below broker.session.timeout.ms (400)",
        ),
        (
            '[sut_settings]\n"metadata.log.max.snapshot.interval.records" = -1\n',
            {},
            "{f}: sut_settings: metadata.log.max.snapshot.interval.records: '-1' is not an integer >= 0",
        ),
    ],
)
def test_bad_sut_settings_are_one_line_before_the_run(tmp_path, text, flags, message):
    path = write(tmp_path, 'backend = "netns"\n' + text)  # the settings start on line 2
    with pytest.raises(UserError) as info:
        load_test(path, flags)
    assert str(info.value).startswith(message.format(f=path)) and "\n" not in str(info.value), str(info.value)
