"""Where Apache Kafka comes from for `--sut kafka`: one pinned version's jars, fetched from Maven Central.

`python -m harness.db.kafka.dist` (setup.sh runs it) fetches them with `mvn dependency:copy-dependencies`
from the small pom beside this file into `~/.cache/kchaos/kafka-<version>/` (or `$KCHAOS_KAFKA_JARS`),
only when they are missing. A fetch writes the jars into a temporary directory and renames it into
place with a `jars.txt` manifest last, so an interrupted fetch never looks complete. The nodes run
`java -cp '<dir>/*' kafka.Kafka server.properties`; `kchaos doctor` says whether Java and the jars are
there (`probe`).
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

KAFKA_VERSION = "4.1.1"  # one of kafka_2.13's 4.x versions on Maven Central; pom.xml says the same
MIN_JAVA = 17  # Kafka 4.x brokers and controllers need Java 17
POM = Path(__file__).with_name("pom.xml")
MANIFEST = "jars.txt"
# How every Kafka JVM of the harness runs, and what the class-data-sharing archive is made with (the
# archive only serves JVMs started with the same options): C1 only, since a test cluster on a shared
# 2-core machine spends its start-up compiling (measured: 8-19 s to serve with C1 alone, 16-24 s
# with both compilers), and the serial collector (one GC thread).
ARCHIVED_JVM_OPTS = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")
SERVER_JAR = f"kafka_2.13-{KAFKA_VERSION}.jar"


class KafkaDistError(Exception):
    """Java or the Kafka jars are missing (the message names the fix)."""


def jar_dir(version: str = KAFKA_VERSION) -> Path:
    """Where the pinned version's jars live: $KCHAOS_KAFKA_JARS, else ~/.cache/kchaos/kafka-<version>."""
    chosen = os.environ.get("KCHAOS_KAFKA_JARS")
    if chosen:
        return Path(chosen)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kchaos" / f"kafka-{version}"


def installed_jars(directory: Path | None = None) -> list[Path]:
    """The jars of a complete fetch (every name the manifest lists is there); [] when incomplete."""
    directory = directory or jar_dir()
    manifest = directory / MANIFEST
    if not manifest.is_file():
        return []
    names = [line.strip() for line in manifest.read_text(encoding="utf-8").splitlines() if line.strip()]
    jars = [directory / name for name in names]
    if SERVER_JAR not in names or not all(j.is_file() for j in jars):
        return []
    return jars


def classpath(directory: Path | None = None) -> str:
    """The nodes' `-cp` (the jar directory's wildcard); KafkaDistError naming the fix when not fetched."""
    directory = directory or jar_dir()
    if not installed_jars(directory):
        raise KafkaDistError(
            f"the Kafka {KAFKA_VERSION} jars are not in {directory}: run `bash setup.sh` "
            "or `python -m harness.db.kafka.dist` (needs mvn and Maven Central)"
        )
    return f"{directory}/*"


def java_version(java: str | None = None) -> tuple[str, int]:
    """(the java program, its major version); KafkaDistError when there is none or it is too old."""
    java = java or shutil.which("java")
    if java is None:
        raise KafkaDistError("java not found (--sut kafka needs Java 17+: apt-get install openjdk-17-jre-headless)")
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise KafkaDistError(f"{java} -version failed: {exc}") from None
    return java, java_major(out.stderr + out.stdout, java)


def java_major(version_output: str, java: str) -> int:
    """The major version in what `java -version` printed; KafkaDistError when there is none or it is
    too old for Kafka (`java` names the program in the message: a path, or a host's java)."""
    m = re.search(r'version "(\d+)(?:\.(\d+))?', version_output)
    if m is None:
        raise KafkaDistError(f"{java} -version printed no version")
    major = int(m.group(1)) if m.group(1) != "1" else int(m.group(2) or 0)
    if major < MIN_JAVA:
        raise KafkaDistError(f"{java} is Java {major}; Kafka {KAFKA_VERSION} needs Java {MIN_JAVA}+")
    return major


def java_mounts(java: str) -> list[Path]:
    """What a container needs of this host's Java to run `java` at the same path: the real JDK
    directory (`java` resolved through /etc/alternatives) and the /etc directories its links point to
    (Debian keeps conf/ and the CA store there; links elsewhere are docs and GUI libraries a server never
    loads), each outermost one only. The docker backend
    bind-mounts them read-only, so the node image carries no JDK and the CDS archive made by this very
    JVM serves in the containers too."""
    home = Path(java).resolve().parents[1]
    found = [home]
    for link in home.rglob("*"):
        if link.is_symlink():
            target = link.resolve()
            if target.exists() and target.is_relative_to("/etc"):
                found.append(target.parent)
    outer = sorted(set(found), key=lambda p: len(p.parts))
    return [p for i, p in enumerate(outer) if not any(p.is_relative_to(q) for q in outer[:i])]


def fetch(directory: Path | None = None, mvn: str | None = None) -> tuple[Path, float | None]:
    """Fetch the jars unless a complete fetch is there; (the directory, seconds taken or None if cached)."""
    directory = directory or jar_dir()
    if installed_jars(directory):
        return directory, None
    mvn = mvn or shutil.which("mvn")
    if mvn is None:
        raise KafkaDistError("mvn not found (apt-get install maven): it fetches the Kafka jars from Maven Central")
    directory.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix=f".{directory.name}-", dir=directory.parent) as tmp:
        staged = Path(tmp) / "jars"
        argv = [
            mvn,
            "-q",
            "-B",
            "-f",
            str(POM),
            "dependency:copy-dependencies",
            f"-DoutputDirectory={staged}",
            "-DincludeScope=runtime",
            f"-Dkafka.version={KAFKA_VERSION}",
        ]
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            tail = (done.stdout + done.stderr).strip().splitlines()[-3:]
            raise KafkaDistError(
                f"mvn could not fetch Kafka {KAFKA_VERSION} (exit {done.returncode}): {' | '.join(tail)}"
            )
        names = sorted(p.name for p in staged.glob("*.jar"))
        if SERVER_JAR not in names:
            raise KafkaDistError(f"mvn finished but {SERVER_JAR} is not among the {len(names)} jars it copied")
        (staged / MANIFEST).write_text("\n".join(names) + "\n", encoding="utf-8")
        if directory.exists():
            shutil.rmtree(directory)  # an incomplete earlier fetch
        staged.rename(directory)
    return directory, time.monotonic() - started


def archive_path(directory: Path | None = None) -> Path:
    """The class-data-sharing archive of Kafka's classes for this machine's Java (see `make_archive`)."""
    return (directory or jar_dir()) / f"kafka-java{java_version()[1]}.jsa"


def make_archive(directory: Path | None = None, timeout_s: float = 180.0) -> tuple[Path, float | None]:
    """Start one Kafka node on loopback until it serves, stop it, and keep the classes it loaded as a
    class-data-sharing archive (-XX:ArchiveClassesAtExit), unless there is one: the nodes start from it
    in about a third of the time on a busy 2-core machine and map its 50 MB shared. (the archive, seconds
    taken or None when cached)"""
    from node.client import kafka_wire as quorum

    directory = directory or jar_dir()
    target = archive_path(directory)
    if target.is_file():
        return target, None
    java, _ = java_version()
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="kchaos-kafka-cds-") as tmp:
        ports = []
        for _ in range(2):
            with socket.socket() as sock:
                sock.bind(("127.0.0.1", 0))
                ports.append(sock.getsockname()[1])
        broker, controller = ports
        props = Path(tmp) / "server.properties"
        props.write_text(
            "process.roles=broker,controller\nnode.id=1\n"
            f"controller.quorum.voters=1@127.0.0.1:{controller}\n"
            f"listeners=PLAINTEXT://127.0.0.1:{broker},CONTROLLER://127.0.0.1:{controller}\n"
            "controller.listener.names=CONTROLLER\n"
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT\n"
            f"log.dirs={tmp}/data\noffsets.topic.replication.factor=1\n",
            encoding="utf-8",
        )
        cp = classpath(directory)
        staged = Path(tmp) / "kafka.jsa"
        fmt = [java, "-cp", cp, "kafka.tools.StorageTool", "format", "-t", "kchaos-cds-archive-0", "-c", str(props)]
        subprocess.run(fmt, capture_output=True, check=True, timeout=timeout_s)
        argv = [java, *ARCHIVED_JVM_OPTS, f"-XX:ArchiveClassesAtExit={staged}", "-cp", cp, "kafka.Kafka", str(props)]
        with open(Path(tmp) / "kafka.log", "wb") as log:
            node = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + timeout_s
            while time.monotonic() < deadline and node.poll() is None:
                try:
                    if quorum.unfenced_brokers("127.0.0.1", broker) == {1}:
                        break
                except quorum.WireError:
                    pass
                time.sleep(0.5)
            else:
                raise KafkaDistError(f"the archive's Kafka node did not serve within {timeout_s:.0f} s")
        finally:
            node.terminate()  # a clean exit writes the archive
            try:
                node.wait(timeout_s)
            except subprocess.TimeoutExpired:
                node.kill()
                node.wait()
        if not staged.is_file():
            raise KafkaDistError(f"{java} wrote no class-data-sharing archive")
        shutil.move(str(staged), target)
    return target, time.monotonic() - started


def probe() -> str:
    """`kchaos doctor`'s row: Java and the jars (KafkaDistError saying what is missing)."""
    java, major = java_version()
    jars = installed_jars()
    if not jars:
        raise KafkaDistError(f"Java {major} at {java}, but the Kafka {KAFKA_VERSION} jars are not in {jar_dir()}")
    size = sum(j.stat().st_size for j in jars) / 1e6
    cds = "with" if archive_path().is_file() else "without"
    where = f"{len(jars)} jars ({size:.0f} MB) in {jar_dir()}, {cds} a CDS archive"
    return f"Kafka {KAFKA_VERSION}: {where}; Java {major} at {java}"


def main() -> int:
    try:
        java_version()
        directory, took = fetch()
    except KafkaDistError as exc:
        print(f"kafka: {exc}", file=sys.stderr)
        return 1
    count = len(installed_jars(directory))
    how = "already there" if took is None else f"fetched in {took:.0f} s"
    print(f"kafka: {KAFKA_VERSION}, {count} jars in {directory} ({how})")
    try:
        archive, took = make_archive(directory)
    except (KafkaDistError, OSError, subprocess.SubprocessError) as exc:  # the nodes start without it, slower
        print(f"kafka: no class-data-sharing archive ({exc}); nodes start without one", file=sys.stderr)
        return 0
    print(
        f"kafka: class-data-sharing archive {archive} ({'already there' if took is None else f'made in {took:.0f} s'})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
