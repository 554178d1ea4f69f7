"""The docker backend for real (root; dockerd is started when none runs, and stopped again): containers
carry every fault, a whole chaos run is valid, and what a SIGKILLed harness leaves `kchaos heal` removes."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.backends.docker import DockerBackend
from harness.backends.docker_engine import LABEL
from harness.backends.ledger import LEDGER_NAME, heal
from harness.backends.resources import netns_names
from harness.runner import run_test
from harness.test_spec import Cluster
from tests.harness_netns.conftest import (
    ECHO,
    PORT,
    heal_if_left,
    needs_root,
    reach_matrix,
    root_reaches,
    wait_reachable,
)
from tests.harness_run.helpers import sim_spec

pytestmark = [pytest.mark.root, needs_root]

REPO = Path(__file__).resolve().parents[2]
NODES = ["n1", "n2", "n3"]


@contextlib.contextmanager
def _engine() -> Iterator[Any]:
    """A client of the Docker engine, started for the occasion if none runs (and stopped again after,
    as a run stops the engine it started). When no engine can be asked the test fails: an engine that
    does not answer says nothing about what is left in it."""
    from harness.backends.docker_engine import ensure_engine
    from harness.backends.ledger import Ledger
    from harness.backends.shell import BackendError

    where = Path(os.environ.get("TMPDIR", "/tmp")) / f"kchaos-engine-{os.getpid()}-{time.monotonic_ns()}"
    where.mkdir()
    try:
        try:
            c = ensure_engine(Ledger.create(where / LEDGER_NAME), where)
        except BackendError as exc:
            pytest.fail(f"cannot ask the Docker engine what is left: {exc}")
        try:
            yield c
        finally:
            c.close()
    finally:
        heal(where / LEDGER_NAME)
        shutil.rmtree(where, ignore_errors=True)


def _engine_objects(tag: str) -> set[str]:
    """Containers and networks labelled with the run's tag, asked of the engine (see `_engine`)."""
    with _engine() as c:
        filters = {"label": f"{LABEL}={tag}"}
        names = {f"container {x.name}" for x in c.containers.list(all=True, filters=filters)}
        return names | {f"network {x.name}" for x in c.networks.list(filters=filters)}


def _remove_engine_objects(*tags: str) -> None:
    """Remove the containers and networks labelled with these runs' tags (see `_engine`)."""
    with _engine() as c:
        for tag in tags:
            filters = {"label": f"{LABEL}={tag}"}
            for container in c.containers.list(all=True, filters=filters):
                container.remove(force=True)
            for network in c.networks.list(filters=filters):
                network.remove()


def _leftovers(tag: str) -> set[str]:
    return _engine_objects(tag) | {n for n in netns_names() if n.startswith(f"kc{tag}")}


def _start_echo(backend: DockerBackend, node: str) -> None:
    script = backend.run_dir / "echo_server.py"  # the run directory is what a container sees of the host
    if not script.exists():
        shutil.copyfile(ECHO, script)
    argv = [backend.node_python, str(script), backend.address(node), str(PORT), "kchaos-docker-test"]
    backend.start(node, argv, env={"PYTHONUNBUFFERED": "1", "HOME": "/not/passed"})


def test_two_runs_at_once_share_the_engine_and_the_last_one_stops_it(tmp_path):
    """A run that stops the engine it started must not stop it under another run still using it (a suite
    run and a run by hand at once left a whole run's containers in the engine's state this way)."""
    from harness.backends.docker_engine import harness_dockerd, reachable

    if reachable() and harness_dockerd() is None:
        pytest.skip("the machine's own Docker engine runs: the harness neither starts nor stops it")
    first, second = DockerBackend(tmp_path / "first", ["n1"]), DockerBackend(tmp_path / "second", ["n1"])
    try:
        first.setup()
        engine = harness_dockerd()
        assert engine is not None
        _start_echo(first, "n1")
        second.setup()
        _start_echo(second, "n1")
        wait_reachable(second.address("n1"), deadline_s=60)
        used = [e for e in second.ledger.all_entries() if e.kind == "dockerd"]  # type: ignore[union-attr]
        assert [e.fields["pid"] for e in used] == [engine[0]]  # the first run's engine, ledgered here too
        first.teardown()
        assert harness_dockerd() == engine and reachable()  # still serving the second run
        assert root_reaches(second.address("n1"))
        assert not _engine_objects(first.tag) and _engine_objects(second.tag)
        second.teardown()
        assert harness_dockerd() is None and not reachable()  # the last user stopped it
    finally:
        for backend in (second, first):
            with contextlib.suppress(Exception):
                backend.teardown()
        left = _leftovers(first.tag) | _leftovers(second.tag)
        # On code with the bug, the engine stopped under the second run keeps its containers and network
        # (with its bridge) in its state: removed here whatever happened, after they were looked for.
        _remove_engine_objects(first.tag, second.tag)
    assert not left


def test_a_killed_run_is_healed_after_another_run_stopped_the_engine(tmp_path):
    """A killed run's lock goes with its process, so another run may be the engine's last user and stop
    it: the killed run's containers and network (and the network's bridge) stay in the stopped engine's
    state. Its heal must start the engine to look, remove them, and stop the engine again."""
    from harness.backends.docker_engine import harness_dockerd, reachable
    from harness.backends.resources import link_names

    if reachable() and harness_dockerd() is None:
        pytest.skip("the machine's own Docker engine runs: the harness neither starts nor stops it")
    child = subprocess.Popen([sys.executable, "-c", _CHILD, str(tmp_path)], cwd=REPO, stdout=subprocess.PIPE, text=True)
    other = DockerBackend(tmp_path / "other", ["n1"])
    tag = ""
    try:
        line = child.stdout.readline() if child.stdout else ""
        assert line.startswith("ready "), f"the child never got its containers up: {line!r}"
        tag = line.split()[1]
        other.setup()  # the killed run's engine, ledgered by this run too
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=30)
        other.teardown()  # now its last user: it stops the engine, the killed run's objects still in it
        assert harness_dockerd() is None and not reachable()
        assert f"kc{tag}" in link_names()  # the network's bridge outlives the engine

        report = heal(tmp_path / LEDGER_NAME)
        assert report.ok, report.failed
        removed = " ".join(report.removed)
        assert removed.count("container ") == 3 and "network " in removed and "dockerd " in removed, report.removed
        assert harness_dockerd() is None  # the engine started to look is stopped again
        assert f"kc{tag}" not in link_names()
        assert heal(tmp_path / LEDGER_NAME).removed == []  # healing twice is a no-op
    finally:
        if child.poll() is None:
            child.kill()
        with contextlib.suppress(Exception):
            other.teardown()
        heal_if_left(tmp_path)
        left = _leftovers(tag) | _leftovers(other.tag) if tag else set()
        if tag:  # on code without the fix the objects stay in the engine's state: removed whatever happened
            _remove_engine_objects(tag, other.tag)
    assert not left


def test_the_engines_goroutine_dumps_stay_out_of_tmp(tmp_path):
    """dockerd asks a containerd that stops answering for a goroutine dump before it restarts it (on a
    loaded machine), and containerd writes it to its temporary directory: for an engine the harness
    starts, that is beside the engine's log, not /tmp."""
    from harness.backends.docker_engine import ensure_engine, harness_dockerd, reachable
    from harness.backends.ledger import Ledger
    from harness.backends.procs import find_where

    if reachable():
        pytest.skip("an engine runs already: this test needs one the harness starts now")
    ledger = Ledger.create(tmp_path / LEDGER_NAME)
    dump = None
    try:
        ensure_engine(ledger, tmp_path).close()
        engine = harness_dockerd()
        assert engine is not None
        (containerd,) = [
            stat.pid
            for stat, argv in find_where(lambda a: Path(a[0]).name == "containerd")
            if stat.ppid == engine[0]  # its own session: only its parent says it is this engine's
        ]
        os.kill(containerd, signal.SIGUSR1)  # what dockerd sends before it kills a containerd that hangs
        name = f"containerd.{containerd}.stacks.log"
        dump = tmp_path / "dockerd-tmp" / name
        deadline = time.monotonic() + 30
        while not dump.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert dump.exists() and "goroutine" in dump.read_text()
        assert not (Path("/tmp") / name).exists()
    finally:
        heal(tmp_path / LEDGER_NAME)
        if dump is not None:
            with contextlib.suppress(OSError):
                (Path("/tmp") / dump.name).unlink()  # on code without the fix
    assert harness_dockerd() is None


def test_containers_carry_partition_kill_and_pause_and_leave_nothing(tmp_path):
    backend = DockerBackend(tmp_path, NODES)
    try:
        with backend:
            for node in NODES:
                _start_echo(backend, node)
            for node in NODES:
                wait_reachable(backend.address(node), deadline_s=60)

            backend.partition({"n1": frozenset({"n2"})})  # n1 stops hearing n2
            assert reach_matrix(backend, [("n2", "n1"), ("n3", "n1"), ("n2", "n3")]) == {
                ("n2", "n1"): False,
                ("n3", "n1"): True,
                ("n2", "n3"): True,
            }

            backend.kill("n1")
            assert not backend.is_alive("n1") and not root_reaches(backend.address("n1"), timeout=1.0)
            backend.restart("n1")  # a new container, in the same namespace: same address, same rules
            wait_reachable(backend.address("n1"), deadline_s=60)
            assert reach_matrix(backend, [("n2", "n1"), ("n3", "n1")]) == {("n2", "n1"): False, ("n3", "n1"): True}

            backend.heal_network()
            assert reach_matrix(backend, [("n2", "n1")]) == {("n2", "n1"): True}

            backend.pause("n2")
            assert backend.is_paused("n2") and backend.is_alive("n2")
            assert not root_reaches(backend.address("n2"), timeout=1.0)  # the kernel accepts, nobody echoes
            backend.resume("n2")
            wait_reachable(backend.address("n2"))

            backend.terminate("n3")
            assert backend.wait_stopped("n3", 30.0) and not backend.is_alive("n3")
            env = backend.client.containers.get(f"{backend.bridge}-n1-p").attrs["Config"]["Env"]
            assert "PYTHONUNBUFFERED=1" in env and not any(e.startswith("HOME=/not") for e in env)
    finally:
        heal_if_left(tmp_path)
    assert not _leftovers(backend.tag)


def test_a_sigkilled_harness_leaves_containers_that_heal_removes(tmp_path):
    child = subprocess.Popen([sys.executable, "-c", _CHILD, str(tmp_path)], cwd=REPO, stdout=subprocess.PIPE, text=True)
    try:
        line = child.stdout.readline() if child.stdout else ""
        assert line.startswith("ready "), f"the child never got its containers up: {line!r}"
        tag = line.split()[1]
        assert _engine_objects(tag)  # something to clean up
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=30)
        report = heal(tmp_path / LEDGER_NAME)
        assert report.ok, report.failed
        assert any(r.startswith("container ") for r in report.removed)
        assert not _leftovers(tag)
        assert heal(tmp_path / LEDGER_NAME).removed == []  # healing twice is a no-op
    finally:
        if child.poll() is None:
            child.kill()
        heal_if_left(tmp_path)


_CHILD = """
import sys, time
from pathlib import Path
from harness.backends.docker import DockerBackend
backend = DockerBackend(Path(sys.argv[1]), ["n1", "n2"])
backend.setup()
script = Path(sys.argv[1]) / "sleeper.py"
script.write_text("import time\\nwhile True: time.sleep(1)\\n")
backend.start("n1", [backend.node_python, str(script)])
print("ready", backend.tag, flush=True)
time.sleep(600)
"""


ALL_KINDS = ("partition", "packet", "clock", "kill", "pause", "disk_stall", "disk_fail", "lose_unsynced", "corrupt")


def test_a_chaos_run_on_docker_with_every_fault_kind_is_valid(tmp_path):
    # Dealt (`nemesis_draw="deck"`), the first nine starts are one of each kind. At random, seed 2 needed
    # eighteen starts to draw every kind, more than fit in the run when each fault takes 1.5 s to start or
    # stop, as it can on a loaded machine.
    spec = sim_spec(
        seed=44,
        nemesis_draw="deck",
        backend="docker",
        cluster=Cluster(controllers=3, brokers=2),
        nemesis=ALL_KINDS,
        time_limit_s=60.0,
        nemesis_interval_s=2.0,
        nemesis_duration_s=3.0,
        concurrency=5,
        rate=30.0,
    )
    try:
        result = run_test(spec, root=tmp_path, say=lambda _: None, progress=False)
    finally:
        for ledger in tmp_path.glob(f"*/*/{LEDGER_NAME}"):
            heal_if_left(ledger.parent)
    assert result.error is None, result.error
    events = [json.loads(line) for line in (result.run.path / "history.jsonl").read_text().splitlines()]
    started = {e["f"] for e in events if e["process"] == "nemesis" and e["type"] == "info"}
    # corrupt may find nothing to damage (a definite `fail`); every other kind was carried out
    assert {f"start-{kind}" for kind in ALL_KINDS if kind != "corrupt"} <= started, started
    assert sum(1 for e in events if e["process"] != "nemesis" and e["type"] == "ok") > 50
    assert result.valid is True, result.checker_lines
    for node in ("c1", "c2", "c3", "b1", "b2"):
        assert (result.run.path / "nodes" / node / "committed-log.jsonl").is_file()  # dumps came out
    tag = next(
        json.loads(line)["name"][2:]
        for line in (result.run.path / LEDGER_NAME).read_text().splitlines()
        if json.loads(line).get("kind") == "docker-network"
    )
    assert not _leftovers(tag)


def test_etcd_runs_on_docker_and_its_linearizable_reads_stay_valid(tmp_path):
    """The second system under test on this backend: etcd from the node image, one member per
    container, under partition, kill and pause; nothing in the nemesis or backend knows it is etcd."""
    from tests.etcd.test_etcd_runs import etcd_spec

    spec = etcd_spec(seed=3, backend="docker", time_limit_s=20.0)
    try:
        result = run_test(spec, root=tmp_path, say=lambda _: None, progress=False, draw_plots=False)
    finally:
        for ledger in tmp_path.glob(f"*/*/{LEDGER_NAME}"):
            heal_if_left(ledger.parent)
    assert result.error is None, result.error
    path = result.run.path
    events = [json.loads(line) for line in (path / "history.jsonl").read_text().splitlines()]
    assert {"start-partition", "start-kill"} <= {e["f"] for e in events if e["process"] == "nemesis"}
    assert sum(1 for e in events if e["process"] != "nemesis" and e["type"] == "ok") > 100
    assert result.valid is True, result.checker_lines
    for node in NODES:
        assert json.loads((path / "nodes" / node / "etcd-status.json").read_text())["version"].startswith("3.4")
    tag = next(
        json.loads(line)["name"][2:]
        for line in (path / LEDGER_NAME).read_text().splitlines()
        if json.loads(line).get("kind") == "docker-network"
    )
    assert not _leftovers(tag)


def test_the_heal_of_an_unlabelled_container_is_refused(tmp_path):
    """Heal removes only what carries its run's label, whatever a ledger names."""
    from harness.backends.docker_engine import undo_container

    with pytest.raises(ValueError, match="not labelled"), _foreign_container() as name:
        undo_container({"name": name, "run": "feedbeef"})


@contextlib.contextmanager
def _foreign_container() -> Iterator[str]:
    """A container of someone else's (no kchaos label), on an engine started for the test if needed."""
    from harness.backends.docker_image import ensure_image

    with _engine() as c:
        name = f"not-kchaos-{os.getpid()}"
        c.containers.create(ensure_image(c), ["true"], name=name)
        try:
            yield name
        finally:
            c.containers.get(name).remove(force=True)


def test_the_leak_check_fails_when_no_engine_can_be_asked(monkeypatch, tmp_path):
    """An engine that cannot be reached must not read as "nothing leaked" (it did before: the check
    listed nothing from a dead engine and passed)."""
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path / 'no-engine.sock'}")
    with pytest.raises(pytest.fail.Exception, match="cannot ask the Docker engine what is left: no Docker engine"):
        _leftovers("feedbeef")
