"""The reference cluster's node settings (`--sut-setting KEY=VALUE`, `[sut_settings]`): checked by the
node's own config readers before a run, and carried to the simulated nodes' configs on the simulator.

A real node reads them from its server.properties. The simulator builds its nodes' configs itself
(`ClusterConfig`, `RaftConfig`), so each key that means the same there is mapped to its field: the
quorum timeouts and pre-vote, the broker session, heartbeat, lag and request timeouts, the snapshot
interval, and the controller's and broker's other settings. Keys about what the simulator models
differently (listeners, files, security, metrics) have no simulated meaning and are refused on it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from harness.backends.sim import RUN_SNAPSHOT_EVERY_RECORDS
from node.bugs import BUGS_KEY, TEST_CLUSTER_KEY

SNAPSHOT_INTERVAL = "metadata.log.max.snapshot.interval.records"

# Settings every node gets, on a real backend as written here and on the simulator as the same
# values of its ClusterConfig: quick failure detection, so a 60 s run sees faults and recoveries; and
# the whole node exercised (issue 13): snapshots every few records, so catch-up from a snapshot happens
# in every run; and the test-cluster mark without which a node refuses planted bugs (node/bugs.py).
# (SASL/PLAIN on both listeners with the ACL authorizer: `KraftDB.__init__`.)
NODE_SETTINGS: dict[str, str] = {
    "broker.heartbeat.interval.ms": "500",
    "broker.session.timeout.ms": "3000",
    # Small segments, so that runs roll, delete whole segments and give `corrupt truncate-log` a target.
    "metadata.log.segment.bytes": "65536",
    SNAPSHOT_INTERVAL: str(RUN_SNAPSHOT_EVERY_RECORDS),
    TEST_CLUSTER_KEY: "true",
}

# key -> the ClusterConfig field the simulator builds its controllers' and brokers' configs from
CLUSTER_FIELDS: dict[str, str] = {
    "broker.session.timeout.ms": "broker_session_timeout_ms",
    "broker.heartbeat.interval.ms": "broker_heartbeat_interval_ms",
    "replica.lag.time.max.ms": "replica_lag_time_max_ms",
    "request.timeout.ms": "request_timeout_ms",
    SNAPSHOT_INTERVAL: "snapshot_every_records",
}
# The controller's and broker's settings the simulator sets itself (security, planted bugs).
SIM_OWNED = frozenset({"authorizer.enabled", "super.users", "allow.everyone.if.no.acl.found", BUGS_KEY})


@dataclass(frozen=True, slots=True)
class SimSettings:
    """What a run's node settings change in the simulation: `RaftConfig` fields and `ClusterConfig`
    fields (`controller_options` and `broker_options` among them)."""

    raft: dict[str, Any] = field(default_factory=dict)
    cluster: dict[str, Any] = field(default_factory=dict)


def _raft_keys() -> dict[str, str]:
    from node.runtime.server_config import PRE_VOTE_KEY, TIMEOUT_KEYS

    return {**TIMEOUT_KEYS, PRE_VOTE_KEY: "pre_vote"}


def _component_keys() -> tuple[dict[str, str], dict[str, str]]:
    """key -> ControllerConfig field, key -> BrokerConfig field, for the keys the simulator leaves to them."""
    from node.broker.config import BrokerConfig
    from node.controller.config import PROPERTY_NAMES

    controller = {key: name for name, key in PROPERTY_NAMES.items() if key not in SIM_OWNED}
    broker = {key: name for key, name in BrokerConfig.PROPERTY_NAMES.items() if key not in SIM_OWNED}
    return controller, broker


def _base(backend: str | None) -> dict[str, str]:
    """What the nodes run with before the settings: NODE_SETTINGS, and on the simulator its own
    cluster's timeouts (a broker's replica heartbeat must stay below the lag time it really has)."""
    if backend != "sim":
        return dict(NODE_SETTINGS)
    from node.sim.cluster import ClusterConfig

    defaults = ClusterConfig.__dataclass_fields__
    own = {key: str(defaults[name].default) for key, name in CLUSTER_FIELDS.items() if key != SNAPSHOT_INTERVAL}
    return {**NODE_SETTINGS, **own}


def off_sim(settings: Mapping[str, str]) -> list[str]:
    """The keys of `settings` that mean nothing on the simulator, in their order."""
    controller, broker = _component_keys()
    mapped = {**_raft_keys(), **CLUSTER_FIELDS, **controller, **broker}
    return [key for key in settings if key not in mapped]


def settings_problem(settings: Mapping[str, str], backend: str | None = None) -> str | None:
    """What the node's own config readers say of these settings on top of what the nodes run with
    (`_base`), for a controller and a broker, or None: a typo or a bad value is one line before the run, not a node
    that exits at start and is started again until the readiness wait gives up. On `backend="sim"`,
    also a key that the simulator cannot apply."""
    from node.broker.config import BrokerConfig
    from node.controller.config import ControllerConfig
    from node.raft.config import ConfigError
    from node.runtime.properties import Property
    from node.runtime.server_config import KNOWN_KEYS, build_server_config

    if BUGS_KEY in settings:
        return "planted bugs are switched on with --bug (bugs = [...] in a test file), not as a setting"
    unknown = [key for key in settings if key not in KNOWN_KEYS]
    if unknown:
        return f"{unknown[0]!r} is not a setting the reference cluster's nodes know (node/runtime/server_config.py)"
    if backend == "sim":
        meaningless = off_sim(settings)
        if meaningless:
            return (
                f"{meaningless[0]!r} has no meaning on the simulator, which sets up its nodes' listeners, "
                "files and security itself; use a real backend (netns, docker, ssh)"
            )
    sample = {
        "node.id": "1",
        "process.roles": "controller",
        "listeners": "CONTROLLER://127.0.0.1:9093",
        "controller.listener.names": "CONTROLLER",
        "controller.quorum.voters": "1@127.0.0.1:9093",
        "metadata.log.dir": "data",
        **_base(backend),
        **settings,
    }
    entries = [Property(key, value, line) for line, (key, value) in enumerate(sample.items(), start=1)]
    try:
        build_server_config(entries, "settings")
        ControllerConfig.from_properties(sample)
        BrokerConfig.from_properties(1, sample, "settings")
    except ConfigError as exc:
        return re.sub(r"^settings:(\d+:)? ?", "", str(exc))
    interval = settings.get(SNAPSHOT_INTERVAL)
    if interval is not None and not re.fullmatch(r"\s*\d+\s*", interval):
        return f"{SNAPSHOT_INTERVAL}: {interval!r} is not an integer >= 0 (0: never)"
    return None


def sim_settings(settings: Mapping[str, str]) -> SimSettings:
    """The simulation's config fields for `settings`, read by the node's own config readers. The
    settings must have passed `settings_problem(settings, "sim")`; keys `off_sim` are left out."""
    if not settings:  # every simulated run without settings: nothing to read, no configs to build
        return SimSettings()
    from node.broker.config import BrokerConfig
    from node.controller.config import ControllerConfig
    from node.runtime.server_config import PRE_VOTE_KEY

    raft_keys = _raft_keys()
    controller_keys, broker_keys = _component_keys()
    raft: dict[str, Any] = {}
    cluster: dict[str, Any] = {}
    merged = {**_base("sim"), **settings}  # as settings_problem read them
    controller = ControllerConfig.from_properties(merged)
    broker = BrokerConfig.from_properties(1, merged, "settings")
    controller_options: dict[str, Any] = {}
    broker_options: dict[str, Any] = {}
    for key, text in settings.items():
        if key == PRE_VOTE_KEY:
            raft["pre_vote"] = text.strip().lower() == "true"
        elif key in raft_keys:
            raft[raft_keys[key]] = int(text)
        elif key in CLUSTER_FIELDS:
            cluster[CLUSTER_FIELDS[key]] = int(text)
        elif key in controller_keys:
            controller_options[controller_keys[key]] = getattr(controller, controller_keys[key])
        elif key in broker_keys:
            broker_options[broker_keys[key]] = getattr(broker, broker_keys[key])
    if controller_options:
        cluster["controller_options"] = controller_options
    if broker_options:
        cluster["broker_options"] = broker_options
    return SimSettings(raft, cluster)


__all__ = ["CLUSTER_FIELDS", "NODE_SETTINGS", "SimSettings", "off_sim", "settings_problem", "sim_settings"]
