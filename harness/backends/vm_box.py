"""The VM box: a Debian 12 disk image built here with debootstrap (no box can be downloaded here).

Cached by a hash of what goes into it, like the docker image (harness.backends.docker_image), under
`~/.cache/kchaos/vagrant/box-HASH/`:
  disk.qcow2           ext4 root file system (Debian's cloud kernel, openssh, python3, nftables, a JRE, ...)
  vmlinuz, initrd.img  the kernel and initramfs, booted directly by qemu (no boot loader to wait for)
  id_ed25519(.pub)     the login key: root's authorized key in the image (a throwaway, like Vagrant's)
  kchaos.box           the same disk as a libvirt box for `vagrant box add` (metadata.json, box.img)
The guest's PID 1 is a small script (INIT below) that mounts the kernel file systems, loads the
modules, sets the hostname and the address given on the kernel command line, starts sshd, and then
reaps orphans forever; systemd would triple the boot time under software emulation. The node's code
is not in the box: the ssh backend uploads this tree's wheel on every run, as on any other host.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tarfile
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from harness.backends.docker_image import mirror
from harness.backends.docker_image import run_tool as _run
from harness.backends.shell import BackendError

SUITE = "bookworm"
PACKAGES = (
    "linux-image-cloud-amd64",  # virtio, netem (sch_netem), nftables in a small kernel
    "openssh-server",
    "python3",
    "python3-venv",
    "nftables",
    "iptables",
    "iproute2",
    "procps",
    "util-linux",
    "kmod",
    "faketime",
    # Apache Kafka as the system under test (--sut kafka over ssh): each host runs the shipped jars on its
    # own java. About 190 MB installed; the reference cluster and etcd do not need it.
    "openjdk-17-jre-headless",
    # etcd as the system under test (--sut etcd over ssh): each host runs its own, Debian's 3.4 as on
    # this machine (the guests boot with their own init, so the package's service never starts).
    "etcd-server",
)
MODULES = ("virtio_net", "virtio_blk", "nf_tables", "sch_netem")
DISK_SIZE = "2G"
DEBOOTSTRAP_TIMEOUT_S = 1800.0
BOX_NAME = "kchaos/bookworm"

# PID 1 in the guest. Kernel command line: kchaos.host=NAME kchaos.ip=ADDR/PREFIX.
INIT = r"""#!/bin/sh
# kraft-chaos VM init (harness/backends/vm_box.py): the least a node needs, fast under emulation.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev 2>/dev/null
mkdir -p /dev/pts /dev/shm /run/sshd
mount -t devpts devpts /dev/pts
mount -t tmpfs tmpfs /run
mount -t tmpfs tmpfs /dev/shm
mkdir -p /run/sshd
mount -o remount,rw /
for m in @MODULES@; do modprobe "$m" 2>/dev/null; done
host=kc; ip=
for word in $(cat /proc/cmdline); do
    case "$word" in
        kchaos.host=*) host=${word#kchaos.host=} ;;
        kchaos.ip=*) ip=${word#kchaos.ip=} ;;
    esac
done
hostname "$host"
echo "$host" > /etc/hostname
printf '127.0.0.1 localhost\n127.0.1.1 %s\n' "$host" > /etc/hosts
ip link set lo up
ip link set eth0 up
[ -n "$ip" ] && ip addr add "$ip" dev eth0
/usr/sbin/sshd
echo "kchaos-init: $host up at $ip ($(uname -r))" > /dev/console
exec /usr/bin/python3 -c '
import os, time
while True:
    try:
        os.wait()
    except ChildProcessError:
        time.sleep(1)
'
"""

SSHD_CONFIG = "PermitRootLogin prohibit-password\nUseDNS no\nPasswordAuthentication no\n"


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kchaos" / "vagrant"


def box_hash() -> str:
    h = hashlib.sha256()
    for part in (SUITE, *PACKAGES, *MODULES, DISK_SIZE, INIT, SSHD_CONFIG):
        h.update(part.encode() + b"\0")
    return h.hexdigest()[:12]


@dataclass(frozen=True)
class Box:
    """A built box's files."""

    path: Path

    @property
    def disk(self) -> Path:
        return self.path / "disk.qcow2"

    @property
    def kernel(self) -> Path:
        return self.path / "vmlinuz"

    @property
    def initrd(self) -> Path:
        return self.path / "initrd.img"

    @property
    def key(self) -> Path:
        return self.path / "id_ed25519"

    @property
    def vagrant_box(self) -> Path:
        return self.path / "kchaos.box"

    def complete(self) -> bool:
        return all(p.is_file() for p in (self.disk, self.kernel, self.initrd, self.key, self.path / "box.json"))


def current_box() -> Box:
    return Box(cache_root() / f"box-{box_hash()}")


def ensure_box(say: Callable[[str], None] = lambda _: None) -> Box:
    """This tree's box, built first if it is not in the cache."""
    box = current_box()
    if box.complete():
        return box
    for tool in ("debootstrap", "mkfs.ext4", "qemu-img", "ssh-keygen"):
        if shutil.which(tool) is None:
            raise BackendError(f"building the VM box needs {tool} (apt-get install debootstrap e2fsprogs qemu-utils)")
    if os.geteuid() != 0:
        raise BackendError("building the VM box runs debootstrap, which needs root")
    box.path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="kchaos-box-", dir=box.path.parent) as tmp:
        work = Path(tmp)
        rootfs = work / "rootfs"
        say(f"making a {SUITE} rootfs with debootstrap for box-{box_hash()} (minutes; cached afterwards)")
        _debootstrap(rootfs)
        out = work / "box"
        out.mkdir()
        _configure(rootfs, out)
        say("writing the disk image")
        raw = work / "disk.raw"
        _run(["mkfs.ext4", "-q", "-F", "-L", "kchaos-root", "-d", str(rootfs), str(raw), DISK_SIZE], "mkfs.ext4")
        _run(["qemu-img", "convert", "-O", "qcow2", str(raw), str(out / "disk.qcow2")], "qemu-img convert")
        raw.unlink()
        (out / "box.json").write_text(
            json.dumps({"hash": box_hash(), "suite": SUITE, "packages": list(PACKAGES)}, indent=1) + "\n"
        )
        if box.path.exists():
            shutil.rmtree(box.path)
        out.replace(box.path)
    return box


def _debootstrap(rootfs: Path) -> None:
    argv = ["debootstrap", "--variant=minbase", f"--include={','.join(PACKAGES)}", SUITE, str(rootfs), mirror()]
    _run(argv, "debootstrap", DEBOOTSTRAP_TIMEOUT_S)


def _configure(rootfs: Path, out: Path) -> None:
    """Init, sshd, the login key; the kernel and initramfs copied out for direct boot."""
    init = rootfs / "sbin" / "kchaos-init"
    init.write_text(INIT.replace("@MODULES@", " ".join(MODULES)), encoding="utf-8")
    init.chmod(0o755)
    (rootfs / "etc/ssh/sshd_config.d").mkdir(parents=True, exist_ok=True)
    (rootfs / "etc/ssh/sshd_config.d/kchaos.conf").write_text(SSHD_CONFIG, encoding="utf-8")
    for old in (rootfs / "etc/ssh").glob("ssh_host_*"):
        old.unlink()
    _run(["ssh-keygen", "-q", "-A", "-f", str(rootfs)], "ssh-keygen -A")
    _run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "kchaos-box", "-f", str(out / "id_ed25519")], "ssh-keygen"
    )
    ssh_dir = rootfs / "root" / ".ssh"
    ssh_dir.mkdir(mode=0o700, exist_ok=True)
    (ssh_dir / "authorized_keys").write_text((out / "id_ed25519.pub").read_text())
    (ssh_dir / "authorized_keys").chmod(0o600)
    (rootfs / "etc/fstab").write_text("# the root file system is mounted by the kernel (root=/dev/vda)\n")
    kernels = sorted((rootfs / "boot").glob("vmlinuz-*"))
    initrds = sorted((rootfs / "boot").glob("initrd.img-*"))
    if not kernels or not initrds:
        raise BackendError(f"debootstrap made no kernel or initramfs under {rootfs / 'boot'}")
    shutil.copyfile(kernels[-1], out / "vmlinuz")
    shutil.copyfile(initrds[-1], out / "initrd.img")
    shutil.rmtree(rootfs / "var/cache/apt/archives", ignore_errors=True)
    (rootfs / "var/cache/apt/archives/partial").mkdir(parents=True, exist_ok=True)


def add_to_vagrant(box: Box, say: Callable[[str], None] = lambda _: None) -> str:
    """Package the box for vagrant-libvirt and register it (`vagrant box add`); the name it got."""
    if shutil.which("vagrant") is None:
        raise BackendError("vagrant not found (apt-get install vagrant)")
    if not box.vagrant_box.is_file():
        say(f"packaging {box.vagrant_box}")
        _vagrant_box(box.path)
    _run(["vagrant", "box", "add", "--force", "--name", BOX_NAME, str(box.vagrant_box)], "vagrant box add", 900.0)
    return BOX_NAME


def _vagrant_box(out: Path) -> None:
    """The same disk as a libvirt box (metadata.json, Vagrantfile, box.img), for vagrant-libvirt."""
    size_gb = int(DISK_SIZE.rstrip("G"))
    metadata = {"provider": "libvirt", "format": "qcow2", "virtual_size": size_gb}
    vagrantfile = (
        'Vagrant.configure("2") do |config|\n'
        '  config.ssh.username = "root"\n'
        "  config.vm.provider :libvirt do |lv|\n"
        '    lv.kernel = File.join(File.dirname(__FILE__), "vmlinuz")\n'
        '    lv.initrd = File.join(File.dirname(__FILE__), "initrd.img")\n'
        '    lv.cmdline = "root=/dev/vda rw console=ttyS0 init=/sbin/kchaos-init net.ifnames=0"\n'
        "  end\n"
        "end\n"
    )
    staging = out / "vagrant-box"
    staging.mkdir(exist_ok=True)
    (staging / "metadata.json").write_text(json.dumps(metadata) + "\n")
    (staging / "Vagrantfile").write_text(vagrantfile)
    partial = out / "kchaos.box.partial"
    with tarfile.open(partial, "w:gz", compresslevel=1) as tar:
        tar.add(staging / "metadata.json", arcname="metadata.json")
        tar.add(staging / "Vagrantfile", arcname="Vagrantfile")
        tar.add(out / "disk.qcow2", arcname="box.img")
        tar.add(out / "vmlinuz", arcname="vmlinuz")
        tar.add(out / "initrd.img", arcname="initrd.img")
    shutil.rmtree(staging)
    partial.replace(out / "kchaos.box")
