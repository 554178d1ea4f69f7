#!/bin/sh
# Make a Debian/Ubuntu host ready for kraft-chaos's ssh backend (vagrant provision runs it as root; on
# another machine: `sudo sh provision.sh`). Installs only what is missing, so running it again is a no-op:
#   python3 >= 3.11 (the nodes run in a venv made with `python3 -m venv --without-pip`), nftables
#   (partitions), faketime (libfaketime: clock faults), util-linux (setsid), procps. A login other than
#   root needs password-less `sudo -n` for nft (Vagrant boxes have it for the vagrant user).
# KCHAOS_PROVISION_CHECK=1 only reports what is missing (exit 1 if anything is).
set -eu

missing=""
want() { missing="$missing $1"; }

if ! python3 -c 'import sys, venv; assert sys.version_info >= (3, 11)' 2>/dev/null; then want python3; fi
command -v nft >/dev/null 2>&1 || want nftables
ls /usr/lib/*/faketime/libfaketime.so.1 /usr/lib/faketime/libfaketime.so.1 2>/dev/null | grep -q . || want faketime
command -v setsid >/dev/null 2>&1 || want util-linux
command -v pgrep >/dev/null 2>&1 || want procps

if [ -n "$missing" ]; then
    if [ "${KCHAOS_PROVISION_CHECK:-0}" = 1 ]; then
        echo "kchaos provision: missing:$missing"
        exit 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q
    # shellcheck disable=SC2086 # one word per package
    apt-get install -y -q --no-install-recommends $missing
fi

python3 -c 'import sys, venv; assert sys.version_info >= (3, 11), sys.version' || {
    echo "kchaos provision: python3 is older than 3.11; use a newer box (KCHAOS_BOX)" >&2
    exit 1
}
echo "kchaos provision: ready ($(python3 -V 2>&1), $(nft --version 2>/dev/null | head -n 1), libfaketime)"
