"""The etcd adapter's pieces that need no cluster: error mapping, the watch-order checker, where
`--sut etcd` may run, the generators."""

from __future__ import annotations

import argparse
import json
import subprocess
from pathlib import Path

import httpx
import pytest

from checkers.history import pair, read_events
from checkers.watch_order import check_watch_order
from harness.cli import main
from harness.db.etcd import EtcdDB
from harness.test_spec import load_test
from vocab.db import DBError
from vocab.errors import UserError
from vocab.generators.core import Rng
from workloads.etcd_append import op_maker as append_ops
from workloads.etcd_client import EtcdError, failed, prefix_end, server_error, transport_error
from workloads.etcd_register import op_maker as register_ops

# --- errors: definite (fail) vs indefinite (info), as Jepsen's etcd client maps them -----------------


def test_nothing_sent_is_definite_and_a_lost_answer_is_not():
    request = httpx.Request("POST", "http://10.0.0.1:2379/v3/kv/put")
    assert transport_error(httpx.ConnectError("refused", request=request)).definite
    assert transport_error(httpx.ConnectTimeout("slow", request=request)).definite
    assert transport_error(httpx.PoolTimeout("pool", request=request)).definite
    assert not transport_error(httpx.ReadTimeout("slow", request=request)).definite
    assert not transport_error(httpx.RemoteProtocolError("closed", request=request)).definite
    assert not transport_error(httpx.ReadError("reset", request=request)).definite


@pytest.mark.parametrize(
    ("code", "message", "definite"),
    [
        (14, "etcdserver: request timed out", False),
        (14, "etcdserver: no leader", False),
        (2, "etcdserver: leader changed", False),
        (2, "etcdserver: too many requests", True),
        (2, "raft: stopped", True),
        (3, "etcdserver: duplicate key given in txn request", True),
        (11, "etcdserver: mvcc: required revision has been compacted", True),
        (13, "something new", False),
    ],
)
def test_server_errors_are_classified_by_code_and_message(code, message, definite):
    error = server_error(503, {"error": message, "code": code, "message": message})
    assert error.definite is definite and message in str(error)


def test_a_write_that_may_have_happened_is_info_and_any_failed_read_is_fail():
    maybe = EtcdError("etcdserver: request timed out", definite=False)
    assert failed(maybe, "n1").type == "info"
    assert failed(maybe, "n1", read=True).type == "fail"
    assert failed(EtcdError("refused", definite=True), "n1").type == "fail"


def test_prefix_end_covers_exactly_the_prefix():
    assert prefix_end("watch/") == "watch0"
    assert "watch/9" < prefix_end("watch/") <= "watch0"


# --- where --sut etcd runs ------------------------------------------------------------------------------


def test_etcd_is_refused_on_sim_with_one_line_and_no_run(tmp_path, capsys):
    code = main(["run", "--sut", "etcd", "--backend", "sim", "--results", str(tmp_path)])
    err = capsys.readouterr().err.strip()
    assert code == 254
    assert err.count("\n") == 0 and "etcd is not available on the sim backend" in err
    assert not any(tmp_path.iterdir())


def test_workloads_name_the_system_they_speak_to(tmp_path):
    with pytest.raises(UserError, match="workload config-register: that workload runs on kafka, kraft, not on etcd"):
        load_test(None, {"sut": "etcd", "backend": "netns", "workload": "config-register"})
    with pytest.raises(UserError, match="workload register: that workload runs on etcd, not on kraft"):
        load_test(None, {"backend": "netns", "workload": "register"})
    test = tmp_path / "t.toml"
    test.write_text('sut = "etcd"\nbackend = "netns"\nworkload = "watch"\n[cluster]\ncontrollers = 3\nbrokers = 2\n')
    with pytest.raises(UserError, match=r"t.toml:1: sut: etcd has no brokers"):
        load_test(test)
    with pytest.raises(UserError, match="--sut: clock, disk_stall faults cannot be done to etcd nodes"):
        load_test(None, {"sut": "etcd", "backend": "netns", "nemesis": "partition,clock,disk_stall"})
    spec = load_test(None, {"sut": "etcd", "backend": "netns", "workload": "list-append", "nodes": "5"})
    assert spec.nodes == ["n1", "n2", "n3", "n4", "n5"]


def test_a_test_file_naming_etcd_gets_etcd_defaults(tmp_path):
    from harness.run_cli import register, resolve

    test = tmp_path / "etcd.toml"
    test.write_text('sut = "etcd"\nbackend = "netns"\n')
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    spec = resolve(parser.parse_args(["run", "--test", str(test)]))
    assert (spec.sut, spec.nodes, spec.workload) == ("etcd", ["n1", "n2", "n3"], "register")


# --- generators -----------------------------------------------------------------------------------------


def test_register_keys_rotate_and_cas_expects_the_last_value_written():
    used: set[str] = set()
    make = register_ops(keys=2, key_ops=10, read_fraction=0.3, cas_fraction=0.4, used=used)
    rng = Rng(5)
    ops = [make(rng, i) for i in range(40)]
    assert {op.key.split("/")[1] for op in ops} == {"0", "1", "2", "3"} and used == {op.key for op in ops}
    last: dict[str, int] = {}
    for op in ops:
        if op.f == "cas":
            assert op.value[0] == last[op.key]
        if op.f in ("write", "cas"):
            last[op.key] = op.value if op.f == "write" else op.value[1]
    writes = [op.value if op.f == "write" else op.value[1] for op in ops if op.f != "read"]
    assert len(writes) == len(set(writes)) and {"read", "write", "cas"} == {op.f for op in ops}


def test_append_elements_are_unique_and_reads_mix_with_appends():
    make = append_ops(active=3, span=4, max_txn_length=4, read_fraction=0.5)
    rng = Rng(9)
    mops = [m for i in range(200) for m in make(rng, i).value]
    appended = [m[2] for m in mops if m[0] == "append"]
    assert len(appended) == len(set(appended)) and any(m[0] == "r" for m in mops)


# --- the watch-order checker ----------------------------------------------------------------------------


def _history(events: list[dict]) -> object:
    lines = []
    for i, event in enumerate(events):
        lines.append(json.dumps({"index": i, "time": i * 1000, "node": None, **event}))
    return pair(read_events(lines))


def _write(process: int, key: str, value: int, revision: int | None, kind: str = "ok") -> list[dict]:
    done = {"value": value, "revision": revision} if kind == "ok" else value
    return [
        {"process": process, "type": "invoke", "f": "write", "value": value, "key": key},
        {"process": process, "type": kind, "f": "write", "value": done, "key": key},
    ]


def _watch(process: int, start: int, events: list[list], until: int | None = None) -> list[dict]:
    value: dict = {"start": start, "events": events}
    if until is not None:
        value["until"] = until
    return [
        {"process": process, "type": "invoke", "f": "watch", "value": None},
        {"process": process, "type": "ok", "f": "watch", "value": value},
    ]


GOOD = [*_write(0, "watch/0", 1, 2), *_write(1, "watch/1", 2, 3), *_write(0, "watch/0", 3, 4)]
ALL = [[2, "watch/0", 1], [3, "watch/1", 2], [4, "watch/0", 3]]


def test_watches_that_show_every_revision_in_order_are_valid():
    history = _history([*GOOD, *_watch(5, 1, ALL, until=4), *_watch(6, 3, ALL[1:])])
    verdict = check_watch_order(history)
    assert verdict.valid is True and verdict.details["revisions_seen"] == 3


@pytest.mark.parametrize(
    ("watches", "anomaly"),
    [
        (_watch(5, 1, [ALL[0], ALL[2]]), "out-of-order"),  # revision 3 skipped
        (_watch(5, 1, [ALL[1], ALL[0], ALL[2]]), "out-of-order"),  # delivered late
        (_watch(5, 2, ALL[1:]), "late-start"),  # asked from 2, began at 3
        ([*_watch(5, 1, ALL), *_watch(6, 2, [[2, "watch/0", 3], *ALL[1:]])], "disagreement"),
        (_watch(5, 1, ALL[:2], until=4), "missed-write"),  # a final watch that stopped short
        (_watch(5, 1, [*ALL, [5, "watch/1", 99]]), "phantom"),  # nobody wrote 99
    ],
)
def test_each_watch_anomaly_is_found(watches, anomaly):
    verdict = check_watch_order(_history([*GOOD, *watches]))
    assert verdict.valid is False and verdict.details["anomaly_counts"][anomaly] >= 1, verdict.details


def test_a_failed_write_seen_by_a_watch_is_a_phantom_and_no_watch_is_unknown():
    failed_write = _write(2, "watch/1", 7, None, kind="fail")
    verdict = check_watch_order(_history([*GOOD, *failed_write, *_watch(5, 1, [*ALL, [5, "watch/1", 7]])]))
    assert verdict.details["anomaly_counts"]["phantom"] == 1
    assert check_watch_order(_history(GOOD)).valid == "unknown"


# --- a cas refused before it was sent observed nothing (checkers.models.RegisterModel) ------------------


@pytest.mark.parametrize(
    ("error", "valid"), [("ConnectError: All connection attempts failed", True), ("compare failed", False)]
)
def test_a_failed_cas_is_an_observation_only_when_its_compare_failed(error, valid):
    from checkers.linearizable import check
    from checkers.models import RegisterModel

    # cas 1->2 commits; a cas 2->3 fails; a later read sees 2. Refused before sending: it says nothing
    # and the history is linearizable. Failed its compare: the value was not 2 then, yet 2 is read after.
    rows = [
        {"time": 0, "process": 0, "type": "invoke", "f": "write", "value": 1},
        {"time": 1, "process": 0, "type": "ok", "f": "write", "value": 1},
        {"time": 2, "process": 0, "type": "invoke", "f": "cas", "value": [1, 2]},
        {"time": 3, "process": 0, "type": "ok", "f": "cas", "value": [1, 2]},
        {"time": 4, "process": 1, "type": "invoke", "f": "cas", "value": [2, 3]},
        {"time": 5, "process": 1, "type": "fail", "f": "cas", "value": [2, 3], "error": error},
        {"time": 6, "process": 0, "type": "invoke", "f": "read", "value": None},
        {"time": 7, "process": 0, "type": "ok", "f": "read", "value": 2},
    ]
    verdict = check(pair(read_events([{**r, "index": i} for i, r in enumerate(rows)])), RegisterModel())
    assert verdict.valid is valid


class HostsAnswering:
    """Around the adapter only: a remote-host backend (it has `ship_files`) whose hosts answer `etcd
    --version` as told, and that records what it starts. The real hosts: tests/harness_ssh (netns hosts)
    and tests/harness_vagrant (VMs)."""

    def __init__(self, code: int, output: str) -> None:
        self.code, self.output = code, output
        self.asked: list[tuple[str, list[str]]] = []
        self.started: dict[str, list[str]] = {}

    def exec(self, node: str, argv: list[str], *, timeout: float) -> subprocess.CompletedProcess[str]:
        self.asked.append((node, argv))
        return subprocess.CompletedProcess(argv, self.code, self.output, "")

    def ship_files(self, node: str, files: list[Path], name: str) -> str:
        raise AssertionError("etcd ships nothing: each host has its own")

    def start(self, node: str, argv: list[str], *, env: object, cwd: object) -> None:
        self.started[node] = argv

    def address(self, node: str) -> str:
        return f"192.0.2.{node[1:]}"

    def data_dir(self, node: str) -> str:
        return f"/hosts/{node}/data"


@pytest.mark.parametrize(
    ("code", "output", "says"),
    [
        (127, "sh: 1: exec: etcd: not found", "etcd on the host of n1: not found (--sut etcd over ssh needs etcd 3.4+"),
        (0, "etcd Version: 3.3.25\n", "etcd on the host of n1 is etcd 3.3; --sut etcd needs etcd 3.4+"),
        (0, "Usage: etcd [flags]\n", "etcd on the host of n1 --version printed no version"),
    ],
)
def test_a_host_without_etcd_3_4_stops_the_install_in_one_line_before_any_member_starts(tmp_path, code, output, says):
    backend = HostsAnswering(code, output)
    db = EtcdDB(["n1", "n2", "n3"], "token")
    with pytest.raises(DBError) as caught:
        db.install(backend, tmp_path)  # type: ignore[arg-type]
    assert str(caught.value).startswith(says) and "\n" not in str(caught.value), caught.value
    assert backend.started == {} and not (tmp_path / "nodes").exists()


def test_each_host_runs_its_own_etcd_and_nothing_is_made_here_for_its_data(tmp_path):
    backend = HostsAnswering(0, "etcd Version: 3.5.17\nGit SHA: 507c0de\nGo Version: go1.22.9\n")
    db = EtcdDB(["n1", "n2", "n3"], "token")
    db.install(backend, tmp_path)  # type: ignore[arg-type]
    assert sorted(node for node, _ in backend.asked) == ["n1", "n2", "n3"]
    assert {argv[0] for argv in backend.started.values()} == {"etcd"}  # the host's PATH, not this machine's
    assert "--data-dir=/hosts/n2/data" in backend.started["n2"]
    assert not (tmp_path / "nodes").exists() and not Path("/hosts").exists()
