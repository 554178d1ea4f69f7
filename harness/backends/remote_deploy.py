"""What the SSH backend puts on each host before a node starts: the code, a venv, a control script.

- The project's own wheel, made from the working tree (the packages pyproject.toml lists, with their
  package data) straight into a zip: no build step, no network, nothing written into the tree, and
  named by a hash of its content so an unchanged tree is never uploaded or installed twice.
- The `crc32c` wheel for the host's Python and machine (`pip download`, cached), the node's only
  dependency outside the standard library.
- A venv per code hash, ROOT/venvs/HASH, made with `python -m venv --without-pip` (no ensurepip or
  network needed on the host) into which both wheels are unpacked: a wheel is a zip laid out as
  site-packages, and neither has scripts or data to place.
- `kchaos-ctl` (remote_ctl.sh): starts a node under setsid/nohup with a pid file holding PID and start
  time, and signals it only while that PID still has that start time.
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
import re
import subprocess
import sys
import tomllib
import zipfile
from dataclasses import dataclass
from pathlib import Path

from harness.backends.shell import BackendError

REPO_ROOT = Path(__file__).resolve().parents[2]
CTL_SCRIPT = Path(__file__).with_name("remote_ctl.sh")
DIST = "kraft_chaos"
ZIP_TIME = (2020, 1, 1, 0, 0, 0)  # fixed member times: the same tree gives the same bytes


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kchaos" / "wheels"


@dataclass(frozen=True)
class Wheel:
    path: Path
    digest: str  # sha256 of the file, first 16 hex digits


def _project() -> tuple[str, list[str], list[str]]:
    """(version, package patterns, package-data globs) from pyproject.toml."""
    doc = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    include = doc["tool"]["setuptools"]["packages"]["find"]["include"]
    data = doc["tool"]["setuptools"].get("package-data", {}).get("*", [])
    return doc["project"]["version"], include, data


def _package_files() -> list[Path]:
    """Every file of the listed packages that a wheel carries (sources and package data), sorted."""
    _, include, data = _project()
    tops = sorted({p.rstrip("*") for p in include})
    suffixes = {".py", *(g.removeprefix("*") for g in data)}
    files = []
    for top in tops:
        base = REPO_ROOT / top
        for path in base.rglob("*"):
            rel = path.relative_to(REPO_ROOT)
            if "__pycache__" in rel.parts or not path.is_file() or path.suffix not in suffixes:
                continue
            if not (path.parent / "__init__.py").is_file():
                continue  # only files inside packages
            files.append(rel)
    return sorted(files)


def build_wheel(out_dir: Path | None = None) -> Wheel:
    """The working tree's wheel (cached under its content hash)."""
    version, _, _ = _project()
    files = _package_files()
    content = hashlib.sha256()
    for rel in files:
        content.update(str(rel).encode() + b"\0" + (REPO_ROOT / rel).read_bytes() + b"\0")
    tree = content.hexdigest()[:12]
    full_version = f"{version}+t{tree}"
    out_dir = Path(out_dir or cache_dir())
    target = out_dir / f"{DIST}-{full_version}-py3-none-any.whl"
    if not target.is_file():
        out_dir.mkdir(parents=True, exist_ok=True)
        _write_wheel(target, files, full_version)
    return Wheel(target, hashlib.sha256(target.read_bytes()).hexdigest()[:16])


def _write_wheel(target: Path, files: list[Path], version: str) -> None:
    dist_info = f"{DIST}-{version}.dist-info"
    metadata = f"Metadata-Version: 2.1\nName: kraft-chaos\nVersion: {version}\n"
    wheel = "Wheel-Version: 1.0\nGenerator: kchaos\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    members = [(str(rel), (REPO_ROOT / rel).read_bytes()) for rel in files]
    members += [(f"{dist_info}/METADATA", metadata.encode()), (f"{dist_info}/WHEEL", wheel.encode())]
    record = io.StringIO()
    for name, data in members:
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.write(f"{name},sha256={digest},{len(data)}\n")
    record.write(f"{dist_info}/RECORD,,\n")
    members.append((f"{dist_info}/RECORD", record.getvalue().encode()))
    tmp = target.with_suffix(".tmp")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members:
            info = zipfile.ZipInfo(name, ZIP_TIME)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            zf.writestr(info, data)
    os.replace(tmp, target)


def crc32c_wheel(python_tag: str, machine: str) -> Path:
    """The crc32c wheel matching the one installed here, for CPython `python_tag` (e.g. "311") on
    `machine` (uname -m), from the cache or `pip download`."""
    from importlib import metadata

    version = metadata.version("crc32c")
    if not re.fullmatch(r"\d{2,3}", python_tag) or not re.fullmatch(r"[A-Za-z0-9_]+", machine):
        raise BackendError(f"cannot pick a crc32c wheel for python {python_tag!r} on {machine!r}")
    out = cache_dir() / f"crc32c-cp{python_tag}-{machine}"
    found = sorted(out.glob(f"crc32c-{version}-*.whl"))
    if found:
        return found[0]
    out.mkdir(parents=True, exist_ok=True)
    platforms = [f"manylinux2014_{machine}", f"manylinux_2_17_{machine}", f"manylinux_2_28_{machine}"]
    argv = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary", ":all:"]
    argv += ["--python-version", f"{python_tag[0]}.{python_tag[1:]}", "--implementation", "cp"]
    for platform in platforms:
        argv += ["--platform", platform]
    argv += ["-d", str(out), f"crc32c=={version}"]
    proc = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=300)
    found = sorted(out.glob(f"crc32c-{version}-*.whl"))
    if proc.returncode != 0 or not found:
        detail = (proc.stderr.strip().splitlines() or ["no wheel found"])[-1]
        raise BackendError(f"pip download crc32c=={version} for cp{python_tag} {machine}: {detail}")
    return found[0]


def install_script(root: str, python: str, code_hash: str, wheel_names: list[str]) -> str:
    """Shell that makes ROOT/venvs/HASH from the uploaded wheels unless it is already complete."""
    venv = f"{root}/venvs/{code_hash}"
    unpack = " && ".join(f'"{venv}/bin/python" -m zipfile -e "{root}/wheels/{name}" "$site"' for name in wheel_names)
    return (
        f'set -e; if [ -f "{venv}/.complete" ]; then exit 0; fi; rm -rf "{venv}"; '
        f'"{python}" -m venv --without-pip "{venv}"; '
        f'site=$("{venv}/bin/python" -c "import sysconfig; print(sysconfig.get_paths()[\'purelib\'])"); '
        f"{unpack}; "
        f'"{venv}/bin/python" -c "import crc32c, node.runtime"; touch "{venv}/.complete"'
    )
