#!/usr/bin/env bash
# One entry point for a fresh Debian machine: installs what kraft-chaos needs, then runs
#   bash setup.sh run    — the default chaos run, end to end
#   bash setup.sh test   — lint + the whole test suite
# Anything after the verb is passed on (to `kchaos run` or to pytest).
set -euo pipefail
cd "$(dirname "$0")"

verb="${1:-run}"; shift || true

# System packages: Python tooling, Java for Spark, Chromium for report rendering tests, the
# network tools the netns backend drives, libfaketime for its clock faults (gcc builds the
# preload shims), libfuse2 for lazyfs (lose_unsynced), Docker's engine plus debootstrap for the docker
# backend (its node image is built here, from Debian), OpenSSH (the ssh backend's client; its tests
# run an sshd per namespace host), vagrant (its tests validate the Vagrantfile), qemu (the VM tests boot
# a cluster of real VMs from a box built here with debootstrap: `kchaos vagrant up`), etcd 3.4 (`--sut etcd`,
# the second system under test; etcd-client brings etcdctl for looking around) and Maven (it fetches Apache
# Kafka's jars for `--sut kafka`, the third, from Maven Central).
# apt-get only runs when something is missing.
apt_pkgs=(python3-venv python3-dev gcc openjdk-17-jre-headless chromium iproute2 iptables nftables procps faketime
          libfuse2 docker.io debootstrap openssh-client openssh-server vagrant etcd-server etcd-client
          qemu-system-x86 qemu-utils e2fsprogs maven)
missing=()
for p in "${apt_pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# A Python that already has venv (e.g. pyenv) makes python3-venv/python3-dev unnecessary.
if python3 -c 'import venv, ensurepip' 2>/dev/null; then
    missing=("${missing[@]/python3-venv}"); missing=("${missing[@]/python3-dev}")
fi
command -v java >/dev/null 2>&1 && missing=("${missing[@]/openjdk-17-jre-headless}")
command -v mvn >/dev/null 2>&1 && missing=("${missing[@]/maven}")
mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sed '/^$/d')
if ((${#missing[@]})); then
    echo "setup: installing ${missing[*]}" >&2
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
fi
# setuptools 77+ in the venv too, so `python setup.py build_ext --inplace` reads pyproject.toml as pip's build does
.venv/bin/python -m pip install -q --upgrade pip 'setuptools>=77' >/dev/null
.venv/bin/python -m pip install -q -e '.[test,fast]'
# Byte-code for the project's own modules, once: where PYTHONDONTWRITEBYTECODE is set (CI images,
# build farms) every kchaos command would otherwise recompile what it imports (~0.1 s a command).
.venv/bin/python -m compileall -q -j 0 vocab harness node nemesis workloads checkers reports >/dev/null
# The netns backend's clock and disk preload shims, compiled once into ~/.cache/kchaos/native.
.venv/bin/python -m harness.backends.native >/dev/null
# Apache Kafka's jars for `--sut kafka` (one pinned version, harness/db/kafka/pom.xml), fetched with Maven
# into ~/.cache/kchaos/kafka-<version> only when they are missing (~45 MB, 12-22 s the first time).
.venv/bin/python -m harness.db.kafka.dist
export PATH="$PWD/.venv/bin:$PATH"

case "$verb" in
run)
    exec kchaos run "$@"
    ;;
test)
    export KCHAOS_REQUIRE_NATIVE=1  # the compiled checker core must have been built (tests/checkers/test_native.py)
    export KCHAOS_REQUIRE_ALL=1     # everything a test could skip for is installed above: a skip fails (tests/conftest.py)
    ruff check .
    ruff format --check . || { echo "setup: run 'ruff format .' to fix formatting" >&2; exit 1; }
    set +e
    # Workers: most tests wait on real processes, sockets and timers, so 4 fit 2 cores (tests/conftest.py
    # keeps tests that judge host-wide state on one worker). KCHAOS_TEST_WORKERS=0 runs in one process.
    python -m pytest -n "${KCHAOS_TEST_WORKERS:-4}" --dist loadgroup "$@"
    rc=$?
    set -e
    if [ "$rc" -eq 5 ]; then
        echo "setup: pytest collected no tests — treating that as a failure" >&2
        exit 1
    fi
    exit "$rc"
    ;;
*)
    echo "setup: unknown verb '$verb' (expected 'run' or 'test')" >&2
    exit 2
    ;;
esac
