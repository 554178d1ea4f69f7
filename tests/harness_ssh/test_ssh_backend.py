"""The ssh backend against real sshd hosts (network namespaces, see sshd_hosts.py): every fault it lists,
each effect seen from outside the host (reachability from another host, /proc, what the process itself
prints), teardown leaving nothing, and `kchaos heal` after a SIGKILLed harness."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from harness.backends.ssh import LATENCY_FILE, SshBackend
from tests.harness_netns.conftest import PORT, reach_matrix
from tests.harness_ssh.sshd_hosts import PYTHON, needs_sshd, sshd_hosts
from vocab.faults.kinds import ClockFault, DiskFault

pytestmark = [pytest.mark.root, needs_sshd]
HOSTS = ["h1", "h2", "h3"]
NODES = ["n1", "n2", "n3"]
REPO = Path(__file__).resolve().parents[2]

# What each node runs here: an echo server on its address (for reachability), and every 50 ms one JSON
# line with its wall clock and how long a write+fsync in its data dir took.
CHILD = """
import json, os, socket, sys, threading, time
address, port, data = sys.argv[1], int(sys.argv[2]), sys.argv[3]
os.makedirs(data, exist_ok=True)
server = socket.create_server((address, port))
def serve():
    while True:
        conn, _ = server.accept()
        with conn:
            conn.sendall(conn.recv(16))
threading.Thread(target=serve, daemon=True).start()
fd = os.open(os.path.join(data, "file"), os.O_WRONLY | os.O_CREAT, 0o644)
while True:
    start = time.monotonic()
    try:
        os.write(fd, b"x")
        os.fsync(fd)
        err = None
    except OSError as exc:
        err = exc.errno
    ms = (time.monotonic() - start) * 1000
    print(json.dumps({"wall": time.time(), "fsync_ms": ms, "errno": err}), flush=True)
    time.sleep(0.05)
"""


def child_argv(backend: SshBackend, node: str) -> list[str]:
    return [PYTHON, "-c", CHILD, backend.address(node), str(PORT), str(backend.data_dir(node))]


def host_of(node: str) -> str:
    return HOSTS[NODES.index(node)]


def last_line(hosts, backend: SshBackend, node: str, after: float) -> dict:
    """The node's newest stdout line written after true time `after` (read from the host's directory)."""
    log = hosts.roots[host_of(node)] / "runs" / backend.tag / "nodes" / node / "stdout.log"
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        text = log.read_text() if log.exists() else ""
        # whole lines only: the child may be writing the last one as we read (a suite run, stop 42)
        lines = text[: text.rfind("\n") + 1].splitlines()
        if lines:
            doc = json.loads(lines[-1])
            doc["at"] = time.time()
            if doc["at"] > after:
                return doc
        time.sleep(0.1)
    raise AssertionError(f"{node} printed nothing after {after}")


def until_line(hosts, backend: SshBackend, node: str, wanted, seconds: float = 10.0) -> dict:
    """The first newest-line reading (polled every 0.1 s for `seconds`) that satisfies `wanted`."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        doc = last_line(hosts, backend, node, time.time())
        if wanted(doc):
            return doc
    raise AssertionError(f"{node} printed no line that satisfies the condition within {seconds} s")


def stat_state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def firewall_tables(hosts) -> str:
    return "".join(hosts.net.exec(h, ["nft", "list", "tables"]).stdout for h in HOSTS)


def test_every_listed_fault_over_ssh_and_teardown_leaves_nothing(tmp_path):
    with sshd_hosts(tmp_path, HOSTS) as hosts:
        backend = SshBackend(tmp_path / "run", NODES, hosts.inventory)
        with backend:
            backend.enable_faults(["partition", "kill", "pause", "clock", "disk_stall"])
            pids = {n: backend.start(n, child_argv(backend, n))[0] for n in NODES}
            # each node runs in its host's network namespace, reached only through SSH
            for node, pid in pids.items():
                ns = subprocess.run(["ip", "netns", "identify", str(pid)], capture_output=True, text=True).stdout
                assert ns.strip() == hosts.net.hosts[host_of(node)].netns
            assert list(hosts.root.iterdir()) == []  # the hosts' root is empty from here
            assert (hosts.roots["h1"] / "bin" / "kchaos-ctl").is_file()
            time.sleep(1.0)
            pairs = [("h2", "h1"), ("h3", "h1"), ("h1", "h2")]
            assert all(reach_matrix(hosts.net, pairs).values())

            backend.partition({"n1": frozenset({"n2"})})  # n1 stops hearing n2
            assert reach_matrix(hosts.net, pairs) == {("h2", "h1"): False, ("h3", "h1"): True, ("h1", "h2"): False}
            assert backend.blocked_sources("n1") == {backend.address("n2")}
            backend.heal_network()
            assert all(reach_matrix(hosts.net, pairs).values())

            backend.pause("n2")
            assert stat_state(pids["n2"]) in ("T", "t") and backend.is_paused("n2")
            backend.resume("n2")
            assert stat_state(pids["n2"]) not in ("T", "t")

            before = time.time()
            backend.clock("n3", ClockFault("bump", delta_ms=3_600_000))
            seen = last_line(hosts, backend, "n3", before + 0.3)
            assert 3590 < seen["wall"] - seen["at"] < 3610
            backend.clock_reset("n3")
            seen = last_line(hosts, backend, "n3", time.time() + 0.3)
            assert abs(seen["wall"] - seen["at"]) < 5

            backend.disk("n1", DiskFault("stall", delay_ms=400, ops=("fsync",)))
            seen = last_line(hosts, backend, "n1", time.time() + 1.0)
            assert seen["fsync_ms"] >= 390
            backend.disk_heal("n1")
            # healed: an fsync that is not stalled comes back (a busy machine may slow one, not all)
            fast = until_line(hosts, backend, "n1", lambda doc: doc["fsync_ms"] < 390)
            assert fast["fsync_ms"] < 390

            backend.kill("n3")
            assert not backend.is_alive("n3") and pids["n3"] not in node_processes(backend.tag)
            backend.restart("n3")
            assert backend.is_alive("n3") and len(node_processes(backend.tag)) == 3
            backend.partition({"n3": frozenset({"n1", "n2"})})  # left for teardown to undo
            backend.pause("n1")
        # teardown: no process of ours on any host, no packet filter table of this run, ledger closed
        assert not node_processes(backend.tag)
        assert not list(Path(tempfile.gettempdir()).glob(f"kcssh-{backend.tag}-*"))  # shared connections' sockets
        assert f"kchaos_{backend.tag}" not in firewall_tables(hosts)
        assert backend.ledger is not None and not backend.ledger.outstanding()
        figures = json.loads((tmp_path / "run" / LATENCY_FILE).read_text())
        assert {"partition", "heal_network", "pause", "resume", "kill", "restart", "clock", "disk"} <= set(
            figures["faults"]
        )


KILLED_HARNESS = """
import sys, time
sys.path.insert(0, {repo!r})
from harness.backends.ssh import SshBackend
from vocab.faults.kinds import ClockFault
backend = SshBackend({run!r}, {nodes!r}, {inventory!r})
backend.setup()
backend.enable_faults(["clock"])
for node in {nodes!r}:
    backend.start(node, [{python!r}, "-c", "import time; time.sleep(1000)"])
backend.partition({{"n1": frozenset({{"n2", "n3"}})}})
backend.pause("n2")
backend.clock("n3", ClockFault("bump", delta_ms=60000))
print(backend.tag, flush=True)
time.sleep(1000)
"""


def test_heal_after_a_sigkilled_harness_removes_remote_processes_rules_and_faults(tmp_path, capsys):
    from harness.cli import main

    with sshd_hosts(tmp_path, HOSTS) as hosts:
        run = tmp_path / "run"
        code = KILLED_HARNESS.format(
            repo=str(REPO), run=str(run), nodes=NODES, inventory=str(hosts.inventory), python=PYTHON
        )
        harness = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
        try:
            tag = harness.stdout.readline().strip()
            assert tag, "the harness did not get its faults in place"
        finally:
            os.kill(harness.pid, signal.SIGKILL)
            harness.wait()
        left = node_processes(tag)
        assert len(left) == 3 and any(stat_state(p) in ("T", "t") for p in left)
        assert f"kchaos_{tag}" in firewall_tables(hosts)
        clock_file = hosts.roots["h3"] / "runs" / tag / "nodes" / "n3" / "faketime"
        assert clock_file.read_text().startswith("+60")

        control = list(Path(tempfile.gettempdir()).glob(f"kcssh-{tag}-*"))
        assert len(control) == 1 and control[0].is_dir()

        assert main(["heal", str(run)]) == 0
        out = capsys.readouterr().out
        assert not control[0].exists()
        assert "healed" in out and "failed 0" in out
        assert not node_processes(tag)
        assert f"kchaos_{tag}" not in firewall_tables(hosts)
        assert clock_file.read_text() == "+0.000 x1\n"
        assert main(["heal", str(run)]) == 0  # twice is a no-op
        assert "nothing to heal" in capsys.readouterr().out


def node_processes(tag: str) -> list[int]:
    """Live processes started in this run's node dirs on the hosts (their cwd is there)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cwd = os.readlink(entry / "cwd")
            state = stat_state(int(entry.name))
        except OSError:
            continue
        if f"/runs/{tag}/nodes/" in cwd and state != "Z":
            found.append(int(entry.name))
    return found


def test_doctor_probes_each_inventory_host_over_ssh(tmp_path):
    from harness.backends.ssh_doctor import ssh_checks
    from harness.doctor_cli import Check

    with sshd_hosts(tmp_path, ["h1", "h2"]) as hosts:
        rows = {c.name: c for c in ssh_checks(Check, str(hosts.inventory))}
        for host in ("h1", "h2"):
            assert rows[f"ssh: {host}"].ok and rows[f"ssh: {host} python"].detail.endswith("3.11 (venv module)")
            assert rows[f"ssh: {host} packet filter"].detail == "nft"
            assert rows[f"ssh: {host} libfaketime"].ok
            java = rows[f"ssh: {host} java"]  # this machine's JDK, seen from the host
            assert java.ok and not java.required and 'version "17' in java.detail, java.detail
        text = hosts.inventory.read_text().replace("port = 2222", "port = 2223")  # nothing listens there
        wrong = tmp_path / "wrong.toml"
        wrong.write_text(text)
        rows = {c.name: c for c in ssh_checks(Check, str(wrong))}
        assert not rows["ssh: h1"].ok and rows["ssh: h1"].required and "Connection refused" in rows["ssh: h1"].detail


def test_files_are_shipped_once_per_content_and_one_shot_commands_see_the_run_files(tmp_path):
    """`ship_files`: one directory per content under the host's opt/, complete or absent, sent again only
    when a file changed. `exec`: a command run on the host in the node's directory, a run-directory file
    it names (also as `-Dkey=PATH`) uploaded and named there, its exit status and output returned."""
    with sshd_hosts(tmp_path, ["h1", "h2"]) as hosts:
        local = tmp_path / "files"
        local.mkdir()
        (local / "a.jar").write_bytes(b"A" * 1000)
        (local / "b.jar").write_bytes(b"B")
        files = sorted(local.iterdir())
        backend = SshBackend(tmp_path / "run", ["n1", "n2"], hosts.inventory)
        with backend:
            first = backend.ship_files("n1", files, "thing")
            copy = hosts.roots["h1"] / Path(first).relative_to(hosts.root)
            assert first.startswith(f"{hosts.root}/opt/thing-") and sorted(p.name for p in copy.iterdir()) == [
                ".complete",
                "a.jar",
                "b.jar",
            ]
            assert (copy / "a.jar").read_bytes() == b"A" * 1000
            inode = copy.stat().st_ino
            assert backend.ship_files("n1", files, "thing") == first and copy.stat().st_ino == inode  # not sent again
            assert not (hosts.roots["h2"] / "opt").exists()  # only where asked
            (local / "b.jar").write_bytes(b"B2")
            changed = backend.ship_files("n1", files, "thing")
            assert (
                changed != first
                and (hosts.roots["h1"] / Path(changed).relative_to(hosts.root) / "b.jar").read_bytes() == b"B2"
            )

            conf = tmp_path / "run" / "nodes" / "n2" / "tool.conf"
            conf.parent.mkdir(parents=True, exist_ok=True)
            conf.write_text("from the run dir\n")
            script = "import os, sys; print(os.getcwd()); print(open(sys.argv[1].split('=', 1)[1]).read()); sys.exit(3)"
            done = backend.exec("n2", [PYTHON, "-c", script, f"-Dconf={conf}"], timeout=30)
            assert done.returncode == 3
            cwd, text = done.stdout.splitlines()[:2]
            assert cwd == backend.node_dir("n2") and text == "from the run dir"
            assert done.args[-1] == f"-Dconf={hosts.root}/runs/{backend.tag}/nodes/n2/tool.conf"
