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

An engine that does not answer is no proof that nothing is left in it: a stopped engine keeps its
containers and networks (and the networks' bridges) on disk. A killed run's lock goes with its
process, so another run may be the last user and stop the engine before the killed run is healed. The
undo of a container or network made on a harness-started engine (its ledger entry says
`engine="harness"`) therefore starts an engine to look when none answers, and the undo of the run's
`dockerd` entry (or this process's exit) stops it again under the same last-user rule.
"""

from __future__ import annotations

import atexit
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
    dockerd = _startable_dockerd()
    if dockerd is None:  # no engine the harness may start or stop
        if reachable(url):
            return client(url)
        installed = shutil.which("dockerd") is not None
        why = "start dockerd" if installed else "dockerd is not installed (apt-get install docker.io)"
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


def _startable_dockerd() -> str | None:
    """The `dockerd` the harness may start (and stop) here: root, the default socket, dockerd installed."""
    dockerd = shutil.which("dockerd")
    return dockerd if engine_url() == DEFAULT_SOCKET and os.geteuid() == 0 else None


def engine_fields(ledger: Ledger) -> dict[str, str]:
    """Fields for the ledger entries of containers and networks made on the engine `ensure_engine` gave
    this ledger's run: `engine="harness"` when the harness started it (it then ledgered a `dockerd`), so
    their undo may start it again to look (module docstring)."""
    return {"engine": "harness"} if any(e.kind == "dockerd" for e in ledger.all_entries()) else {}


def _start_dockerd(ledger: Ledger, rid: int, log_dir: Path, url: str) -> Any:
    """Start the dockerd that ledger entry `rid` names and wait until it answers."""
    argv = ledger.entry(rid).fields["argv"]
    proc = _spawn(argv, log_dir / "dockerd.log")
    ledger.update(rid, pid=proc.pid, starttime=start_time(proc.pid))
    return _await_engine(proc, url, log_dir / "dockerd.log")


def _spawn(argv: list[str], log_path: Path) -> subprocess.Popen[bytes]:
    """Start dockerd with its output in `log_path` and its temporary files beside it, not in /tmp: dockerd
    restarts a containerd that stops answering its health check (a loaded machine) and first asks it for
    a goroutine dump, which containerd writes to its temporary directory (containerd.PID.stacks.log)."""
    tmp = log_path.parent / "dockerd-tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        return subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
            close_fds=True,
            env={**os.environ, "TMPDIR": str(tmp)},
        )


def _await_engine(proc: subprocess.Popen[bytes], url: str, log_path: Path) -> Any:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise BackendError(f"dockerd exited with {proc.returncode} at start-up; see {log_path}")
        if reachable(url):
            return client(url)
        time.sleep(0.2)
    raise BackendError(f"dockerd did not answer within {START_TIMEOUT_S:.0f} s; see {log_path}")


def dockerd_argv(dockerd: str, ledger: Ledger) -> list[str]:
    """A pid file in the run's own directory makes the command line this run's alone, so heal can find
    the engine even if the harness was killed between starting it and ledgering its PID."""
    return [dockerd, *DOCKERD_FLAGS, f"--pidfile={ledger.path.parent.resolve() / 'dockerd.pid'}"]


def _reason(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[-1] if text else type(exc).__name__


def _quiet_client() -> Any | None:
    """For undos: the engine if it still answers, else None (`_find` says what that means)."""
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
        _release_shared(_LOOKING)
        with _flocked(Path(lock), fcntl.LOCK_EX | fcntl.LOCK_NB) as alone:
            if not alone:
                _stop_looked(alone=False)
                return None  # another live run uses the engine: the last of them stops it
            stopped = [what for what in (_stop_dockerd(fields), _stop_looked(alone=True)) if what]
            return ", ".join(stopped) or None
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


# -- an engine started to look at what a healed run left in it (module docstring) ---------------------------

_LOOKING = "engine started to look"  # the key of its shared lock in `_shared`
_looking: tuple[int, int] | None = None  # (pid, start time) of the engine this process started to look


def _engine_to_look() -> Any | None:
    """A client of an engine started for an undo (or of one another run started meanwhile), or None
    when the harness may not start one here (not root, another socket, no dockerd)."""
    global _looking
    dockerd = _startable_dockerd()
    if dockerd is None:
        return None
    locks = cache_dir()
    locks.mkdir(parents=True, exist_ok=True)
    with _flocked(locks / START_LOCK, fcntl.LOCK_EX):
        _hold_shared(_LOOKING, locks / USER_LOCK)
        if reachable():
            return client()
        log_path = locks / "dockerd-heal.log"
        proc = _spawn([dockerd, *DOCKERD_FLAGS, f"--pidfile={locks / 'dockerd-heal.pid'}"], log_path)
        start = start_time(proc.pid)
        if _looking is None:
            atexit.register(_stop_looking_engine)
        _looking = (proc.pid, start) if start is not None else None
        return _await_engine(proc, DEFAULT_SOCKET, log_path)


def _stop_looking_engine() -> str | None:
    """Stop the engine `_engine_to_look` started, unless another run uses it now (the last user stops it)."""
    if _looking is None:
        return None
    _release_shared(_LOOKING)
    with _flocked(cache_dir() / USER_LOCK, fcntl.LOCK_EX | fcntl.LOCK_NB) as alone:
        return _stop_looked(alone)


def _stop_looked(alone: bool) -> str | None:
    """Forget the engine started to look, and stop it if this process holds the engines' lock alone."""
    global _looking
    looked, _looking = _looking, None
    if looked is None or not alone:
        return None  # another run attached to it, ledgered it, and stops it as its last user
    return _stop_dockerd({"pid": looked[0], "starttime": looked[1]})


def _find(kind: str, name: str, fields: dict[str, Any] | None = None) -> Any | None:
    """The engine's container or network called `name`, or None. When no engine answers, one is started
    to look if `fields` say the object was made on a harness-started engine; otherwise nothing of ours
    can be left in the engine (the machine's own, which the harness neither starts nor stops)."""
    c = _quiet_client()
    if c is None and fields is not None and fields.get("engine") == "harness":
        c = _engine_to_look()
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
    container = _find("container", fields["name"], fields)
    if container is None:
        return None
    _check_label("container", container, fields)
    container.remove(force=True)
    return f"container {fields['name']}"


@register_undo("docker-network")
def undo_network(fields: dict[str, Any]) -> str | None:
    network = _find("network", fields["name"], fields)
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
