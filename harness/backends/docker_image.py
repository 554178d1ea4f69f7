"""The node's Docker image, built here with no registry (none is reachable from a test machine).

Two layers, each tagged by a hash of what went into it, so a build happens only when something changed:
- `kchaos-base:<hash>`: a Debian rootfs made by debootstrap (minbase + Python and the network tools
  the faults use), turned into an image by `docker import`. Its tarball is cached in
  `~/.cache/kchaos/docker/` too, so a wiped engine re-imports it in seconds instead of a minute.
- `kchaos-node:<hash>`: the base plus this working tree's packages and the `crc32c` module this
  harness runs with (same Python minor version as Debian's, so the same wheel), on PYTHONPATH.

The node inside needs nothing else: the clock and disk shims are bind-mounted from the host's native
cache, and the run directory is bind-mounted at its own path.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from harness.backends.shell import BackendError

SUITE = "bookworm"
# faketime: libfaketime, for clock faults; etcd-server: for `--sut etcd`
PACKAGES = ("python3", "iproute2", "iptables", "procps", "faketime", "etcd-server")
PROJECT_PACKAGES = ("vocab", "harness", "node", "nemesis", "workloads", "checkers", "reports")
PROJECT_SUFFIXES = (".py", ".c", ".html", ".js", ".css", ".toml")
REPO_ROOT = Path(__file__).resolve().parents[2]
CODE_ROOT = "/opt/kchaos"
LIB = f"{CODE_ROOT}/lib"
DEBOOTSTRAP_TIMEOUT_S = 900.0


def mirror() -> str:
    return os.environ.get("KCHAOS_DEBIAN_MIRROR", "http://deb.debian.org/debian")


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kchaos" / "docker"


def _digest(*parts: bytes | str) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode() if isinstance(part, str) else part)
        h.update(b"\0")
    return h.hexdigest()[:12]


def base_tag() -> str:
    return f"kchaos-base:{_digest(SUITE, *PACKAGES)}"


def _project_files() -> Iterator[tuple[str, Path]]:
    """(path inside lib/, file) for every file of the project's packages an install would ship."""
    for package in PROJECT_PACKAGES:
        for path in sorted((REPO_ROOT / package).rglob("*")):
            if path.is_file() and path.suffix in PROJECT_SUFFIXES and "__pycache__" not in path.parts:
                yield str(path.relative_to(REPO_ROOT)), path


def _crc32c_files() -> Iterator[tuple[str, Path]]:
    """The crc32c package and its dist-info (it reads its own version from the metadata)."""
    from importlib.metadata import distribution

    dist = distribution("crc32c")
    for entry in dist.files or ():
        path = Path(str(dist.locate_file(entry)))
        if path.is_file() and "__pycache__" not in entry.parts and not str(entry).startswith(".."):
            yield str(entry), path


def node_tag() -> str:
    h = hashlib.sha256(base_tag().encode())
    for name, path in [*_project_files(), *_crc32c_files()]:
        h.update(name.encode() + b"\0" + path.read_bytes() + b"\0")
    return f"kchaos-node:{h.hexdigest()[:12]}"


def has_image(client: Any, tag: str) -> bool:
    import docker.errors

    try:
        client.images.get(tag)
    except docker.errors.ImageNotFound:
        return False
    return True


def ensure_image(client: Any, say: Callable[[str], None] = lambda _: None) -> str:
    """The node image's tag, built first if this tree's image is not in the engine yet."""
    tag = node_tag()
    if has_image(client, tag):
        return tag
    _ensure_base(client, say)
    say(f"building {tag} (this working tree's packages on {base_tag()})")
    with tempfile.TemporaryDirectory(prefix="kchaos-image-") as tmp:
        context = Path(tmp)
        for name, path in [*_project_files(), *_crc32c_files()]:
            target = context / "lib" / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)
        (context / "Dockerfile").write_text(
            f"FROM {base_tag()}\n"
            f"COPY lib {LIB}\n"
            f"ENV PYTHONPATH={LIB} PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1\n"
            f"WORKDIR {CODE_ROOT}\n",
            encoding="utf-8",
        )
        try:
            client.images.build(path=str(context), tag=tag, rm=True, labels={"kchaos": "node"})
        except Exception as exc:
            raise BackendError(f"docker build of {tag} failed: {str(exc).strip().splitlines()[-1:]}") from exc
    return tag


def _ensure_base(client: Any, say: Callable[[str], None]) -> None:
    tag = base_tag()
    if has_image(client, tag):
        return
    tarball = cache_dir() / f"{tag.replace(':', '-')}.tar"
    if not tarball.exists():
        say(f"making a {SUITE} rootfs with debootstrap for {tag} (about a minute; cached afterwards)")
        _debootstrap(tarball)
    say(f"importing {tarball} as {tag}")
    repository, _, version = tag.partition(":")
    try:
        client.api.import_image(src=str(tarball), repository=repository, tag=version)
    except Exception as exc:
        raise BackendError(f"docker import of {tarball} failed: {exc}") from exc
    if not has_image(client, tag):
        raise BackendError(f"docker import of {tarball} did not produce {tag}")


def _debootstrap(tarball: Path) -> None:
    if shutil.which("debootstrap") is None:
        raise BackendError("building the node image needs debootstrap (apt-get install debootstrap)")
    if os.geteuid() != 0:
        raise BackendError("building the node image runs debootstrap, which needs root")
    tarball.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="kchaos-rootfs-", dir=tarball.parent) as tmp:
        rootfs = Path(tmp) / "rootfs"
        argv = ["debootstrap", "--variant=minbase", f"--include={','.join(PACKAGES)}", SUITE, str(rootfs), mirror()]
        run_tool(argv, "debootstrap", DEBOOTSTRAP_TIMEOUT_S)
        partial = tarball.with_suffix(".partial")
        with tarfile.open(partial, "w") as tar:
            tar.add(rootfs, arcname=".")
        partial.replace(tarball)


def run_tool(argv: list[str], what: str, timeout: float = 600.0) -> str:
    """Run a build tool (debootstrap, mkfs, qemu-img, ...); its stdout, or a one-line BackendError
    with the last line it printed."""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as exc:
        raise BackendError(f"{what} timed out after {timeout:.0f} s") from exc
    if done.returncode != 0:
        detail = (done.stderr or done.stdout).strip().splitlines()
        raise BackendError(f"{what} failed (exit {done.returncode}): {detail[-1] if detail else ''}")
    return done.stdout


def describe(client: Any | None) -> str:
    """One line for `kchaos doctor`: which image this tree needs and whether it is built."""
    tag = node_tag()
    if client is None:
        return f"{tag} (no engine to ask)"
    if has_image(client, tag):
        return f"{tag} built"
    return f"{tag} not built yet: kchaos image build (or the first docker run builds it)"
