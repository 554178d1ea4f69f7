"""Native preload shims (C sources beside this file), compiled with gcc on first use and cached.

- `kchaos_clock`: put in front of libfaketime so only the wall clock is faked, never a sleep or a wait.
- `kchaos_disk`: stalls or fails fsync/fdatasync/write calls on the node's data dir per a control file.

A build lands in the cache (`$KCHAOS_NATIVE_CACHE`, else `$XDG_CACHE_HOME/kchaos/native`, else
`~/.cache/kchaos/native`) under a name carrying the hash of the source and flags, so an edited source
is rebuilt and an unchanged one never is. Never into the source tree. `python -m harness.backends.native`
builds them all (setup.sh runs it).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
from pathlib import Path

SOURCES = Path(__file__).parent
SHIMS = ("kchaos_clock", "kchaos_disk")
CFLAGS = ("-shared", "-fPIC", "-O2", "-Wall", "-Wextra", "-Werror")
LIBS = ("-ldl",)


class NativeBuildError(RuntimeError):
    """A shim could not be compiled; the message says why and what to install."""


def cache_dir() -> Path:
    if os.environ.get("KCHAOS_NATIVE_CACHE"):
        return Path(os.environ["KCHAOS_NATIVE_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kchaos" / "native"


def shim_path(name: str) -> Path:
    """Where the build of `name` for the current source lives (it may not be built yet)."""
    source = SOURCES / f"{name}.c"
    try:
        text = source.read_bytes()
    except OSError as exc:
        raise NativeBuildError(f"{source}: cannot read the shim's source: {exc.strerror}") from None
    digest = hashlib.sha256(text + " ".join(CFLAGS + LIBS).encode()).hexdigest()[:16]
    return cache_dir() / f"{name}-{digest}.so"


def build(name: str) -> Path:
    """The compiled shim `name` (see SHIMS), compiling it if this source was never built here."""
    if name not in SHIMS:
        raise NativeBuildError(f"unknown shim {name!r} (known: {', '.join(SHIMS)})")
    target = shim_path(name)
    if target.is_file():
        return target
    if shutil.which("gcc") is None:
        raise NativeBuildError(f"gcc not found, needed to build the {name} shim (apt-get install gcc)")
    target.parent.mkdir(parents=True, exist_ok=True)
    # One compiler at a time per cache; a racing builder finds the finished file after the lock.
    with open(target.parent / ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if target.is_file():
            return target
        partial = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        argv = ["gcc", *CFLAGS, "-o", str(partial), str(SOURCES / f"{name}.c"), *LIBS]
        proc = subprocess.run(argv, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            partial.unlink(missing_ok=True)
            first = next((ln for ln in proc.stderr.splitlines() if "error" in ln), proc.stderr.strip()[:200])
            raise NativeBuildError(f"gcc could not build the {name} shim: {first}")
        os.replace(partial, target)
    return target


def main() -> None:
    for name in SHIMS:
        print(f"{name}: {build(name)}")


if __name__ == "__main__":
    main()
