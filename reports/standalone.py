"""A Spark standalone cluster on this machine, from PySpark's own `spark-class`: a master and workers,
each its own JVM process, for trying `kchaos report --master spark://…` (and for its test).

    python -m reports.standalone --workers 2        # prints the master URL; Ctrl-C stops the cluster

Every process is started in a session of its own and stopped by PID (SIGTERM, then SIGKILL) when the
context ends, also when the start fails half-way. Logs and the workers' scratch space go under
`work_dir`.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

START_TIMEOUT_S = 120.0
HOST = "127.0.0.1"


class ClusterError(RuntimeError):
    """The cluster did not come up; the message says which process and where its log is."""


@dataclass
class StandaloneCluster:
    master_url: str
    web_url: str
    work_dir: Path
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def alive_workers(self) -> int:
        with urllib.request.urlopen(f"{self.web_url}/json/", timeout=5) as answer:
            state = json.load(answer)
        return sum(1 for w in state.get("workers", []) if w.get("state") == "ALIVE")


def spark_class() -> Path:
    import pyspark

    path = Path(pyspark.__file__).parent / "bin" / "spark-class"
    if not path.exists():
        raise ClusterError(f"{path}: PySpark's spark-class is missing (pip install pyspark)")
    return path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def _env() -> dict[str, str]:
    import pyspark

    return {
        **os.environ,
        "SPARK_HOME": str(Path(pyspark.__file__).parent),
        "SPARK_LOCAL_IP": HOST,
        "PYSPARK_PYTHON": sys.executable,  # the executors run this interpreter (pandas, pyarrow)
    }


def _start(cluster: StandaloneCluster, name: str, args: list[str]) -> subprocess.Popen[bytes]:
    log = open(cluster.work_dir / f"{name}.log", "ab")  # noqa: SIM115 - the child keeps it
    try:
        proc = subprocess.Popen(
            [str(spark_class()), *args],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            env=_env(),
            start_new_session=True,
        )
    finally:
        log.close()
    cluster.processes.append(proc)
    return proc


def _wait(cluster: StandaloneCluster, what: str, ready: Callable[[], bool], deadline: float) -> None:
    while time.monotonic() < deadline:
        for proc in cluster.processes:
            if proc.poll() is not None:
                raise ClusterError(f"a Spark process exited with {proc.returncode}; logs in {cluster.work_dir}")
        with contextlib.suppress(OSError, ValueError):
            if ready():
                return
        time.sleep(0.5)
    raise ClusterError(f"{what} within {START_TIMEOUT_S:.0f} s; logs in {cluster.work_dir}")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)  # its own session: the JVM and anything it started
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)


@contextlib.contextmanager
def standalone_cluster(
    workers: int = 2, cores: int = 1, memory: str = "1g", work_dir: Path | None = None
) -> Iterator[StandaloneCluster]:
    """A master and `workers` workers (each `cores` cores, `memory`), up and registered."""
    with contextlib.ExitStack() as stack:
        if work_dir is None:
            work_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="kchaos-spark-")))
        work_dir.mkdir(parents=True, exist_ok=True)
        port, web = _free_port(), _free_port()
        cluster = StandaloneCluster(f"spark://{HOST}:{port}", f"http://{HOST}:{web}", work_dir)
        try:
            deadline = time.monotonic() + START_TIMEOUT_S
            master = ["org.apache.spark.deploy.master.Master", "--host", HOST, "--port", str(port)]
            _start(cluster, "master", [*master, "--webui-port", str(web)])
            _wait(cluster, "the master did not answer", lambda: cluster.alive_workers() >= 0, deadline)
            for i in range(workers):
                scratch = work_dir / f"worker-{i}"
                scratch.mkdir(exist_ok=True)
                worker = ["org.apache.spark.deploy.worker.Worker", "--host", HOST, "--webui-port", "0"]
                args = [*worker, "--cores", str(cores), "--memory", memory, "--work-dir", str(scratch)]
                _start(cluster, f"worker-{i}", [*args, cluster.master_url])
            _wait(cluster, f"{workers} workers did not register", lambda: cluster.alive_workers() >= workers, deadline)
            yield cluster
        finally:
            for proc in reversed(cluster.processes):
                _stop(proc)


def main() -> int:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--cores", type=int, default=1)
    parser.add_argument("--memory", default="1g")
    args = parser.parse_args()
    try:
        with standalone_cluster(args.workers, args.cores, args.memory) as cluster:
            print(f"master: {cluster.master_url}  (web UI {cluster.web_url}); Ctrl-C stops it", flush=True)
            with contextlib.suppress(KeyboardInterrupt):
                while True:
                    time.sleep(3600)
    except ClusterError as exc:
        print(f"reports.standalone: {exc}", file=sys.stderr)
        return 254
    return 0


if __name__ == "__main__":
    sys.exit(main())
