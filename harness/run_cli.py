"""`kchaos run`: run a chaos test end to end and print its verdict and run directory.

    kchaos run                                   # the default test: netns when root, else sim
    kchaos run --backend sim --seed 7            # deterministic: same seed, same history.jsonl
    kchaos run --test tests/partition.toml --time-limit 30s --nemesis partition,kill
    kchaos run --backend ssh --inventory vagrant/inventory.toml   # nodes on VMs or other machines
    kchaos run --sut etcd --workload-option reads=serializable    # etcd 3.4 instead of our cluster

The test comes from `--test FILE` (TOML, see harness/test_spec.py) and the flags, which win over the
file. The resolved test is saved as the run's test.json. Exit code (BRIEF §3.4): 0 valid, 1 invalid,
2 unknown, 254 error (bad input, or the run itself failed); with `--test-count N` the worst of the runs.
"""

from __future__ import annotations

import argparse
import os
import sys
import tomllib
from pathlib import Path
from typing import Any

from vocab.errors import UserError

# The reference cluster: 3 controllers + 2 brokers, so client writes go through forwarding brokers.
DEFAULT_NODES = "3+2"
# What a system under test other than kraft runs when the test does not say (its members, its workload).
SUT_DEFAULTS: dict[str, dict[str, str]] = {
    "etcd": {"nodes": "3", "workload": "register"},
    "kafka": {"nodes": "3", "workload": "config-register"},  # 3 combined nodes fit 2 cores
}
BACKENDS = ("sim", "netns", "docker", "ssh")  # as harness.test_spec.BACKENDS (a test checks), without importing it


def default_backend() -> str:
    return "netns" if os.geteuid() == 0 else "sim"


def _file_values(path: str | None) -> dict[str, Any]:
    """The test file's top-level values, read once; empty when there is no file or it cannot be read
    (`load_test` then says why, in one line)."""
    from harness.test_spec import read_test_file

    if path is None:
        return {}
    try:
        return dict(read_test_file(Path(path))[0])
    except UserError:
        return {}


def _options(pairs: list[str] | None, flag: str = "--workload-option") -> dict[str, Any] | None:
    if not pairs:
        return None
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise UserError(f"{flag} {pair!r}: expected KEY=VALUE")
        out[key.strip()] = value.strip()
    return out


def _with_client(options: dict[str, Any] | None, client: str | None) -> dict[str, Any] | None:
    """`--client NAME` is the workload option `client` (workloads/kafka_client.py)."""
    return options if client is None else {**(options or {}), "client": client}


def _nemesis_options(pairs: list[str] | None) -> dict[str, dict[str, Any]] | None:
    """`KIND.KEY=VALUE` pairs (VALUE a TOML value such as -90000, [1, 2] or "EIO"; a bare word is a
    string) grouped by kind."""
    if not pairs:
        return None
    out: dict[str, dict[str, Any]] = {}
    for pair in pairs:
        name, sep, text = pair.partition("=")
        kind, dot, key = name.strip().partition(".")
        if not sep or not dot or not kind or not key:
            raise UserError(f"--nemesis-option {pair!r}: expected KIND.KEY=VALUE, e.g. clock.delta_ms=-90000")
        try:
            value = tomllib.loads(f"v = {text.strip()}")["v"]
        except tomllib.TOMLDecodeError:
            value = text.strip()
        out.setdefault(kind, {})[key.strip()] = value
    return out


def registries() -> Any:
    """The names a test may use: what the backends, adapters, workloads and nemesis implement."""
    from harness.db import SUTS
    from harness.plugins import workload_names
    from harness.test_spec import BACKENDS, Registries
    from vocab.faults.catalogue import FAULT_KINDS

    return Registries(backends=BACKENDS, suts=tuple(SUTS), workloads=workload_names(), nemeses=FAULT_KINDS)


def resolve(args: argparse.Namespace) -> Any:
    """The TestSpec from --test and the flags (flags win); the backend defaults to netns as root."""
    from harness.test_spec import load_test

    given = _file_values(args.test)  # what the test file sets, which a flag's default must not override
    backend = args.backend
    if backend is None and given.get("backend") is None:
        backend = "ssh" if args.inventory else default_backend()
    defaults = SUT_DEFAULTS.get(str(args.sut or given.get("sut") or ""), {})
    nodes = args.nodes
    if nodes is None and given.get("cluster") is None:
        nodes = defaults.get("nodes", DEFAULT_NODES)
    workload = args.workload
    if workload is None and given.get("workload") is None:
        workload = defaults.get("workload")
    overrides = {
        "name": args.name,
        "backend": backend,
        "inventory": args.inventory,
        "sut": args.sut,
        "nodes": nodes,
        "workload": workload,
        "nemesis": args.nemesis,
        "nemesis_interval_s": args.nemesis_interval,
        "nemesis_duration_s": args.nemesis_duration,
        "time_limit_s": args.time_limit,
        "concurrency": args.concurrency,
        "rate": args.rate,
        "seed": args.seed,
        "test_count": args.test_count,
        "leave_db_running": True if args.leave_db_running else None,
        "recovery_s": args.recovery,
        "recovery_tail_s": args.recovery_tail,
        "ready_timeout_s": args.ready_timeout,
        "workload_options": _with_client(_options(args.workload_option), args.client),
        "nemesis_options": _nemesis_options(args.nemesis_option),
        "nemesis_max_active": args.nemesis_max_active,
        "nemesis_draw": args.nemesis_draw,
        "nemesis_buggify": False if args.no_buggify else None,
        "bugs": ",".join(args.bug) if args.bug else None,
        "forger": False if args.no_forger else None,
        "pre_vote": False if args.no_pre_vote else None,
        "sut_settings": _options(args.sut_setting, "--sut-setting"),
    }
    return load_test(args.test, overrides, registries())


def run_command(args: argparse.Namespace) -> int:
    import dataclasses

    if args.list_nemeses:
        from harness.plugins import print_catalogue

        return print_catalogue(as_json=False)

    from harness.run_report import verdict_word
    from harness.runner import combined_exit, run_test

    spec = resolve(args)
    codes = []
    for i in range(spec.test_count):
        this = spec if i == 0 else dataclasses.replace(spec, seed=spec.seed + i)
        print(
            f"kchaos run: test {this.name} ({i + 1}/{spec.test_count}): backend {this.backend}, "
            f"{this.cluster.describe()}, seed {this.seed}",
            file=sys.stderr,
            flush=True,
        )
        result = run_test(this, root=args.results, progress=None if not args.no_progress else False)
        for line in result.checker_lines:
            print(f"  {line}")
        for warning in result.warnings:
            print(f"  warning: {warning}", file=sys.stderr)
        if result.error:
            print(f"kchaos run: error: {result.error}", file=sys.stderr)
        word = verdict_word(result.valid)[0] if result.valid is not None else "error"
        print(f"verdict: {word} (exit {result.exit_code})")
        print(f"run directory: {result.run.path}")
        report = result.run.path / "report.html"
        if report.exists():
            print(f"report: {report}")
        codes.append(result.exit_code)
    return combined_exit(codes)


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "run",
        description=__doc__.split("\n\n")[0],
    )
    p.add_argument(
        "--test", metavar="FILE", help="test file (TOML, or a past run's test.json to run it again); flags win over it"
    )
    p.add_argument("--backend", choices=BACKENDS, help="where the cluster runs (default: netns as root, else sim)")
    p.add_argument(
        "--inventory",
        metavar="FILE",
        help="ssh backend: the hosts to run on (TOML; see docs/concepts/backends.md); implies --backend ssh",
    )
    p.add_argument("--nodes", help="cluster shape: N combined nodes, or C+B controllers+brokers (default 3+2)")
    p.add_argument(
        "--sut",
        help="system under test: kraft (default), etcd (netns, docker, ssh; 3 members, workload register) "
        "or kafka (Apache Kafka 4.x, netns, docker or ssh; 3 combined nodes, workload config-register)",
    )
    p.add_argument("--workload", help="workload name (default config-register; register with --sut etcd)")
    p.add_argument("--nemesis", help="comma-separated fault kinds, e.g. clock,kill,disk_stall; 'none' for none")
    p.add_argument("--nemesis-interval", help="time between two fault starts (e.g. 10s)")
    p.add_argument("--nemesis-duration", help="how long each fault lasts (e.g. 10s)")
    p.add_argument("--nemesis-max-active", help="faults active at once (default 0: every kind may be)")
    p.add_argument(
        "--nemesis-draw",
        help="each start's kind: random (by weight, the default) or deck (every kind once a round, in a drawn order)",
    )
    p.add_argument(
        "--nemesis-option",
        action="append",
        metavar="KIND.KEY=VALUE",
        help="per-kind weight, modes, targets or parameter, e.g. clock.delta_ms=-90000 or kill.weight=3 (repeatable)",
    )
    p.add_argument("--no-buggify", action="store_true", help="sim: no targeted faults (see `kchaos nemeses`)")
    p.add_argument("--list-nemeses", action="store_true", help="print the fault catalogue and exit")
    p.add_argument("--time-limit", help="length of the run phase (e.g. 60s, 2m)")
    p.add_argument("--concurrency", help="client workers")
    p.add_argument("--rate", help="client ops per second in total (0: as fast as they go)")
    p.add_argument("--seed", help="seed (default: random, saved in test.json)")
    p.add_argument("--test-count", help="how many runs of the test (seeds seed, seed+1, ...)")
    p.add_argument("--recovery", help="recovery window after the heal: clients run on, a write must commit (10s)")
    p.add_argument(
        "--recovery-tail",
        help="end the recovery window this long after its first committed write, e.g. 10s (default: it runs out)",
    )
    p.add_argument("--ready-timeout", help="how long the cluster may take to serve at start (90s; JVMs on VMs: 5m)")
    p.add_argument("--name", help="test name (default: <workload>-<nemesis kinds>)")
    p.add_argument("--workload-option", action="append", metavar="KEY=VALUE", help="workload option (repeatable)")
    p.add_argument(
        "--sut-setting",
        action="append",
        metavar="KEY=VALUE",
        help="every node's configuration: a server.properties key (kraft, kafka; on the simulator the keys it "
        "models) or an etcd flag without dashes (repeatable)",
    )
    p.add_argument(
        "--client",
        choices=("kraft-chaos", "confluent-kafka"),
        help="the config workloads' client: ours (default) or confluent-kafka's AdminClient (workload option client)",
    )
    p.add_argument(
        "--bug", action="append", metavar="NAME", help="switch a planted bug on in every node (repeatable; kchaos bugs)"
    )
    p.add_argument("--no-forger", action="store_true", help="no side process sending forged requests")
    p.add_argument(
        "--no-pre-vote",
        action="store_true",
        help="KIP-595 elections without KIP-996 pre-votes (every node; a broken Vote handler shows)",
    )
    p.add_argument("--leave-db-running", action="store_true", help="do not stop the cluster at the end")
    p.add_argument("--results", metavar="DIR", help="results root (default: $KCHAOS_RESULTS or ./results)")
    p.add_argument("--no-progress", action="store_true", help="no live progress line")
    p.set_defaults(func=run_command)
