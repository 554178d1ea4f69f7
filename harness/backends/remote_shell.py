"""Commands on a remote host through the OpenSSH client, one shared connection per host.

Why the OpenSSH client and not paramiko: it is on every machine that has ssh at all, it honours the
user's own ssh set-up (agents, jump hosts, `~/.ssh/config`), and with ControlMaster every command after
the first rides the host's one open TCP+SSH session (a multiplexed channel, no new handshake), so a
command costs one round trip plus a local fork. `ControlPersist` makes the shared connection outlive
a killed harness by at most PERSIST_S idle seconds, so nothing of ours stays behind on this machine.

`run` sends one `sh -c` script; `put` streams a local file (or bytes) through `cat` into a temp name
and renames it, so a reader never sees half a file. `each` runs one function per host in parallel.
"""

from __future__ import annotations

import concurrent.futures
import shlex
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TypeVar

from harness.backends.inventory import Host
from harness.backends.shell import BackendError

PERSIST_S = 30
CONNECT_TIMEOUT_S = 10
T = TypeVar("T")
R = TypeVar("R")


class Remote:
    """One host's shared SSH connection (see the module docstring)."""

    def __init__(self, host: Host, control_dir: Path | None = None) -> None:
        self.host = host
        self._own_dir = control_dir is None
        self.control_dir = Path(control_dir or tempfile.mkdtemp(prefix="kcssh"))
        self._lock = threading.Lock()
        self.commands = 0  # how many commands went over this connection (for the latency figures)
        self.seconds = 0.0

    @property
    def control_path(self) -> Path:
        return self.control_dir / f"{self.host.name}.sock"

    def base_argv(self, *, master: bool = False) -> list[str]:
        h = self.host
        argv = [
            "ssh",
            "-p",
            str(h.port),
            "-i",
            h.key,
            "-l",
            h.user,
            "-o",
            "BatchMode=yes",
            "-o",
            "IdentitiesOnly=yes",
            "-o",
            f"ConnectTimeout={CONNECT_TIMEOUT_S}",
            "-o",
            "ServerAliveInterval=5",
            "-o",
            f"StrictHostKeyChecking={h.host_key_checking}",
            "-o",
            f"ControlPath={self.control_path}",
            "-o",
            f"ControlMaster={'yes' if master else 'no'}",
            "-o",
            f"ControlPersist={PERSIST_S}" if master else "ControlPersist=no",
            "-o",
            "LogLevel=ERROR",
        ]
        if h.known_hosts:
            argv += ["-o", f"UserKnownHostsFile={h.known_hosts}"]
        elif h.host_key_checking == "no":
            argv += ["-o", "UserKnownHostsFile=/dev/null"]
        return argv

    def connect(self) -> None:
        """Open the shared connection (a background ssh that exits PERSIST_S s after its last use)."""
        with self._lock:
            if self.connected():
                return
            proc = subprocess.run(
                [*self.base_argv(master=True), "-f", "-N", self.host.target],
                capture_output=True,
                text=True,
                timeout=CONNECT_TIMEOUT_S + 20,
                stdin=subprocess.DEVNULL,
                check=False,
            )
            if proc.returncode != 0:
                raise BackendError(f"ssh to host {self.host.name} ({self._where()}): {_last_line(proc.stderr)}")

    def connected(self) -> bool:
        proc = subprocess.run(
            [*self.base_argv(), "-O", "check", self.host.target], capture_output=True, timeout=10, check=False
        )
        return proc.returncode == 0

    def close(self) -> None:
        """End the shared connection (its remote processes started with setsid live on)."""
        if self.control_path.exists():
            subprocess.run(
                [*self.base_argv(), "-O", "exit", self.host.target], capture_output=True, timeout=10, check=False
            )
        if self._own_dir:
            shutil.rmtree(self.control_dir, ignore_errors=True)

    def run(
        self, script: str, *, input_bytes: bytes | None = None, check: bool = True, timeout: float = 60.0
    ) -> subprocess.CompletedProcess[bytes]:
        """Run `script` with `sh -c` on the host; with `check`, a non-zero exit raises BackendError."""
        if not self.control_path.exists():
            self.connect()
        argv = [*self.base_argv(), self.host.target, "sh -c " + shlex.quote(script)]
        started = time.perf_counter()
        try:
            proc = subprocess.run(
                argv,
                input=input_bytes,
                stdin=None if input_bytes is not None else subprocess.DEVNULL,
                capture_output=True,
                timeout=timeout,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise BackendError(f"host {self.host.name}: timed out after {timeout:g}s: {_short(script)}") from None
        finally:
            with self._lock:
                self.commands += 1
                self.seconds += time.perf_counter() - started
        if proc.returncode == 255:
            raise BackendError(f"ssh to host {self.host.name} ({self._where()}): {_last_line(proc.stderr)}")
        if check and proc.returncode != 0:
            detail = _last_line(proc.stderr) or _last_line(proc.stdout) or "no output"
            raise BackendError(f"host {self.host.name}: exit {proc.returncode}: {_short(script)}: {detail}")
        return proc

    def out(self, script: str, **kwargs: object) -> str:
        """`run` and return stdout as text."""
        return self.run(script, **kwargs).stdout.decode("utf-8", "replace")  # type: ignore[arg-type]

    def put(self, data: bytes | Path, remote_path: str, *, mode: str | None = None) -> None:
        """Write a local file or bytes to `remote_path` (parent dirs made; replaced in one rename)."""
        payload = data.read_bytes() if isinstance(data, Path) else data
        q = shlex.quote(remote_path)
        chmod = f" && chmod {mode} {q}.tmp" if mode else ""
        self.run(f'mkdir -p "$(dirname {q})" && cat > {q}.tmp{chmod} && mv -f {q}.tmp {q}', input_bytes=payload)

    def get(self, remote_path: str, *, check: bool = True) -> bytes | None:
        """A remote file's bytes (None when it does not exist and not `check`)."""
        proc = self.run(f"cat {shlex.quote(remote_path)}", check=check)
        return proc.stdout if proc.returncode == 0 else None

    def _where(self) -> str:
        return f"{self.host.user}@{self.host.target}:{self.host.port}"


def each(items: Iterable[T], fn: Callable[[T], R]) -> list[R]:
    """fn(item) for every item at once (one thread each); the first error is raised after all finished."""
    items = list(items)
    if len(items) <= 1:
        return [fn(i) for i in items]
    with concurrent.futures.ThreadPoolExecutor(max_workers=len(items), thread_name_prefix="kchaos-ssh") as pool:
        futures = [pool.submit(fn, i) for i in items]
        concurrent.futures.wait(futures)
    return [f.result() for f in futures]


def _last_line(text: str | bytes) -> str:
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def _short(script: str, limit: int = 80) -> str:
    one = " ".join(script.split())
    return one if len(one) <= limit else one[: limit - 3] + "..."
