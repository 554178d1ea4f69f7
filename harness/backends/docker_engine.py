"""The Docker engine the docker backend talks to, through the docker SDK for Python.

Where no engine answers (no systemd here to start one), the backend starts `dockerd` itself, ledgers it
like any other resource, and stops it at teardown, so a run leaves the machine as it found it. Every
container and network the harness creates carries the label `kchaos.run=<tag>`; an undo removes only
what carries its run's label.

Runs at once (a nightly beside a run by hand) share such an engine, and the last one stops it: each run
that uses it ledgers it, whoever started it, and holds a shared lock on `dockerd.lock` (in the image
cache, ~/.cache/kchaos/docker). An undo stops it only if it gets that lock exclusively, i.e. no other
live run holds it (a killed run's lock went with its process); otherwise it leaves the engine to them.
A run about to use the engine takes `dockerd-start.lock` first, so two runs never start two engines,
and its shared lock waits out a stop in progress, after which it starts a new engine.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from harness.backends.docker_image import cache_dir
from harness.backends.ledger import Ledger, register_undo
from harness.backends.procs import find_by_argv, find_where, is_same_process, kill_verified, start_time, wait_gone
from harness.backends.shell import BackendError

LABEL = "kchaos.run"
DEFAULT_SOCKET = "unix:///var/run/docker.sock"
START_TIMEOUT_S = 60.0
# An engine the harness starts touches the host no more than the runs need: no docker0 bridge, no
# iptables chains or NAT, no ip_forward sysctl (all of which outlive dockerd). Nodes only talk to each
# other and to the harness, on the run's own bridge.
DOCKERD_FLAGS = ("--bridge=none", "--iptables=false", "--ip-forward=false", "--ip-masq=false")


def engine_url() -> str:
    return os.environ.get("DOCKER_HOST") or DEFAULT_SOCKET


def client(url: str | None = None, *, timeout: float = 60.0) -> Any:
    """A docker SDK client, or BackendError naming the engine that did not answer."""
    try:
        import docker
    except ImportError as exc:  # a dependency of the project: only a broken install lacks it
        raise BackendError("the docker backend needs the 'docker' Python package (pip install docker)") from exc
    url = url or engine_url()
    try:
        c = docker.DockerClient(base_url=url, timeout=timeout)
        c.ping()
    except Exception as exc:
        raise BackendError(f"no Docker engine answers at {url}: {_reason(exc)}") from exc
    return c


def reachable(url: str | None = None) -> bool:
    try:
        client(url, timeout=5.0).close()
    except BackendError:
        return False
    return True


def ensure_engine(ledger: Ledger, log_dir: Path) -> Any:
    """A client of a running engine; starts (and ledgers) `dockerd` when none answers at the default
    socket. Only root can do that; anyone else gets a one-line error saying what to start. An engine
    another run started is ledgered as this run's too (see the module docstring)."""
    url = engine_url()
    dockerd = shutil.which("dockerd")
    if url != DEFAULT_SOCKET or dockerd is None or os.geteuid() != 0:  # none the harness may start or stop
        if reachable(url):
            return client(url)
        why = "dockerd is not installed (apt-get install docker.io)" if dockerd is None else "start dockerd"
        raise BackendError(f"no Docker engine answers at {url}: {why}")
    log_dir.mkdir(parents=True, exist_ok=True)
    locks = cache_dir()  # one place for every run, whatever its log dir
    locks.mkdir(parents=True, exist_ok=True)
    lock, run = locks / USER_LOCK, str(ledger.path.resolve())
    with _flocked(locks / START_LOCK, fcntl.LOCK_EX):
        _hold_shared(run, lock)
        if not reachable(url):
            rid = ledger.record("dockerd", argv=dockerd_argv(dockerd, ledger), lock=str(lock), run=run)
            return _start_dockerd(ledger, rid, log_dir, url)
        started = harness_dockerd()
        if started is None:  # the machine's own engine: not the harness's to stop
            _release_shared(run)
        else:  # another run's: ours too, until the last of its users stops it
            ledger.record("dockerd", argv=started[2], pid=started[0], starttime=started[1], lock=str(lock), run=run)
        return client(url)


def _start_dockerd(ledger: Ledger, rid: int, log_dir: Path, url: str) -> Any:
    """Start the dockerd that ledger entry `rid` names and wait until it answers."""
    argv = ledger.entry(rid).fields["argv"]
    with open(log_dir / "dockerd.log", "ab") as log:
        proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True, close_fds=True
        )
    ledger.update(rid, pid=proc.pid, starttime=start_time(proc.pid))
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise BackendError(f"dockerd exited with {proc.returncode} at start-up; see {log_dir / 'dockerd.log'}")
        if reachable(url):
            return client(url)
        time.sleep(0.2)
    raise BackendError(f"dockerd did not answer within {START_TIMEOUT_S:.0f} s; see {log_dir / 'dockerd.log'}")


def dockerd_argv(dockerd: str, ledger: Ledger) -> list[str]:
    """A pid file in the run's own directory makes the command line this run's alone, so heal can find
    the engine even if the harness was killed between starting it and ledgering its PID."""
    return [dockerd, *DOCKERD_FLAGS, f"--pidfile={ledger.path.parent.resolve() / 'dockerd.pid'}"]


def _reason(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[-1] if text else type(exc).__name__


def _quiet_client() -> Any | None:
    """For undos: the engine if it still answers (no engine, nothing of ours can be left in it)."""
    with contextlib.suppress(BackendError):
        return client(timeout=30.0)
    return None


def harness_dockerd() -> tuple[int, int, list[str]] | None:
    """(pid, start time, argv) of a running dockerd that some run of the harness started (its flags are
    `DOCKERD_FLAGS`), or None (no engine, or one the harness did not start: never stopped by it)."""
    flags = list(DOCKERD_FLAGS)
    for stat, argv in find_where(lambda a: Path(a[0]).name == "dockerd" and a[1 : 1 + len(flags)] == flags):
        return stat.pid, stat.starttime, argv
    return None


@register_undo("dockerd")
def undo_dockerd(fields: dict[str, Any]) -> str | None:
    lock = fields.get("lock")
    if lock is not None:
        _release_shared(fields.get("run"))
        with _flocked(Path(lock), fcntl.LOCK_EX | fcntl.LOCK_NB) as alone:
            if not alone:
                return None  # another live run uses the engine: the last of them stops it
            return _stop_dockerd(fields)
    return _stop_dockerd(fields)


def _stop_dockerd(fields: dict[str, Any]) -> str | None:
    pid, start = fields.get("pid"), fields.get("starttime")
    if pid is None or start is None:  # started, maybe, by a harness killed before it wrote the PID
        found = find_by_argv(fields["argv"])
        if not found:
            return None
        pid, start = found[0].pid, found[0].starttime
    if not is_same_process(pid, start):
        return None
    kill_verified(pid, start, signal.SIGTERM)  # dockerd stops its containers and cleans up on TERM
    if not wait_gone(pid, start, timeout=30.0):
        kill_verified(pid, start, signal.SIGKILL)
        wait_gone(pid, start)
    with contextlib.suppress(ChildProcessError):  # reap it when this process started it
        os.waitpid(pid, os.WNOHANG)
    return f"dockerd {pid}"


# -- the locks that share an engine between runs (module docstring) ----------------------------------------

USER_LOCK, START_LOCK = "dockerd.lock", "dockerd-start.lock"
_shared: dict[str, int] = {}  # ledger path -> the fd holding this process's shared lock for that run


def _hold_shared(run: str, lock: Path) -> None:
    """Take (blocking) and keep a shared lock on `lock` for `run` (its ledger's path), until its dockerd
    undo releases it."""
    if run in _shared:
        return
    fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    fcntl.flock(fd, fcntl.LOCK_SH)
    _shared[run] = fd


def _release_shared(run: str | None) -> None:
    fd = _shared.pop(run, None) if run is not None else None
    if fd is not None:
        os.close(fd)  # closing the descriptor drops its lock


@contextlib.contextmanager
def _flocked(path: Path, mode: int) -> Iterator[bool]:
    """`flock(path, mode)` while the block runs; yields whether it was taken (False: LOCK_NB refused)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        try:
            fcntl.flock(fd, mode)
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(fd)


def _find(kind: str, name: str) -> Any | None:
    """The engine's container or network called `name`, or None (also when no engine answers: then
    nothing of ours can be left in it)."""
    c = _quiet_client()
    if c is None:
        return None
    import docker.errors

    try:
        return (c.containers if kind == "container" else c.networks).get(name)
    except docker.errors.NotFound:
        return None


def _check_label(kind: str, obj: Any, fields: dict[str, Any]) -> None:
    labels = obj.labels if kind == "container" else obj.attrs.get("Labels") or {}
    if labels.get(LABEL) != fields["run"]:
        raise ValueError(f"refusing to remove {kind} {fields['name']}: not labelled {LABEL}={fields['run']}")


@register_undo("docker-container")
def undo_container(fields: dict[str, Any]) -> str | None:
    container = _find("container", fields["name"])
    if container is None:
        return None
    _check_label("container", container, fields)
    container.remove(force=True)
    return f"container {fields['name']}"


@register_undo("docker-network")
def undo_network(fields: dict[str, Any]) -> str | None:
    network = _find("network", fields["name"])
    if network is None:
        return None
    _check_label("network", network, fields)
    network.remove()
    return f"network {fields['name']}"


@register_undo("docker-pause")
def undo_pause(fields: dict[str, Any]) -> str | None:
    container = _find("container", fields["name"])
    if container is None or container.status != "paused":
        return None
    container.unpause()
    return f"pause of container {fields['name']}"
