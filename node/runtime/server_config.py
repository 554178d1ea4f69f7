"""`server.properties` -> a checked `ServerConfig`, with Kafka's own key names.

A Kafka operator's KRaft file should read as expected: `node.id`, `process.roles`, `listeners`,
`controller.listener.names`, `controller.quorum.voters` (or KIP-595's `quorum.voters`),
`metadata.log.dir` (falling back to `log.dirs`), `cluster.id` and the quorum timeouts under both
KIP-595's `quorum.*` names and Kafka's `controller.quorum.*` names. Keys we do not know are reported
as warnings (each one named, with its line); bad or missing values raise `ConfigError` with a one-line
message naming the key and where it is.

Roles: `controller` makes the node a voter of the metadata quorum and a quorum controller (KIP-631);
`broker` makes it a broker, which fetches the metadata log (as an observer unless it is also a
controller: combined mode). A voter must be listed in the voters and own a controller listener on the
voter's port; a broker serves clients on its other listeners.

Security: a listener's protocol comes from `listener.security.protocol.map` (`NAME:PROTOCOL,…`; a
listener named PLAINTEXT or SASL_PLAINTEXT needs no entry). On a SASL_PLAINTEXT listener clients log
in with SASL/PLAIN against `kchaos.sasl.users` (`name:password,…`); a node logs in to others as
`kchaos.sasl.username` / `kchaos.sasl.password`. `authorizer.class.name` (any value) turns the ACL
authorizer on, with Kafka's `super.users` (`User:a;User:b`) and `allow.everyone.if.no.acl.found`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from node.broker.config import BrokerConfig
from node.bugs import BUGS_KEY, NO_BUGS, TEST_CLUSTER_KEY, Bugs, UnknownBugError, parse_bugs, refusal
from node.controller.config import PROPERTY_NAMES as CONTROLLER_PROPERTY_NAMES
from node.raft.config import ConfigError, RaftConfig, VoterAddress, parse_voters
from node.runtime.file_storage import DEFAULT_SEGMENT_BYTES
from node.runtime.properties import Property, read_properties
from node.security.sasl import parse_users

# KIP-996 pre-votes (default true). Kafka has no setting for it; off only to test elections without it.
PRE_VOTE_KEY = "kchaos.raft.pre.vote.enable"

ROLES = ("broker", "controller")

# Kafka spells the quorum timeouts `controller.quorum.*`; KIP-595 spells them `quorum.*`.
TIMEOUT_KEYS: dict[str, str] = {
    **RaftConfig.PROPERTY_NAMES,
    **{f"controller.{key}": attr for key, attr in RaftConfig.PROPERTY_NAMES.items()},
}

# Accepted and range-checked now, used by later parts (KIP-631 broker lifecycle).
LATER_INT_KEYS: dict[str, int] = {
    "broker.heartbeat.interval.ms": 2000,
    "broker.session.timeout.ms": 9000,
    "controller.socket.timeout.ms": 30000,
    "metadata.max.idle.interval.ms": 500,
}

KNOWN_KEYS = frozenset(
    {
        "node.id",
        "broker.id",
        "process.roles",
        "listeners",
        "advertised.listeners",
        "listener.security.protocol.map",
        "inter.broker.listener.name",
        "controller.listener.names",
        "controller.quorum.voters",
        "quorum.voters",
        "metadata.log.dir",
        "log.dirs",
        "log.dir",
        "cluster.id",
        "metrics.listener",
        "metrics.sample.window.ms",
        "socket.request.max.bytes",
        "kchaos.test.append.enable",
        PRE_VOTE_KEY,
        "kchaos.sasl.users",
        "kchaos.sasl.username",
        "kchaos.sasl.password",
        "authorizer.class.name",
        "super.users",
        "allow.everyone.if.no.acl.found",
        "metadata.log.max.snapshot.interval.records",
        "metadata.log.segment.bytes",
        TEST_CLUSTER_KEY,
        *CONTROLLER_PROPERTY_NAMES.values(),
        *BrokerConfig.PROPERTY_NAMES,
        *TIMEOUT_KEYS,
        *LATER_INT_KEYS,
    }
)


@dataclass(frozen=True, slots=True)
class Listener:
    name: str
    host: str
    port: int
    security_protocol: str = "PLAINTEXT"  # or SASL_PLAINTEXT


@dataclass(frozen=True, slots=True)
class ServerConfig:
    source: str  # the file it came from, for messages
    node_id: int
    roles: frozenset[str]
    listener: Listener | None  # where this node accepts quorum connections (None: an observer with none)
    voters: tuple[VoterAddress, ...]
    data_dir: Path
    cluster_id: str | None
    raft: RaftConfig
    metrics_address: tuple[str, int] | None = None  # Prometheus endpoint (host, port)
    metrics_window_ms: int = 30_000
    max_frame_bytes: int = 104_857_600  # socket.request.max.bytes
    test_append: bool = False  # kchaos.test.append.enable: POST /v1/append on the metrics listener
    later: dict[str, int] = field(default_factory=dict)  # accepted broker.* settings
    warnings: tuple[str, ...] = ()
    broker_listeners: tuple[Listener, ...] = ()  # where a broker serves clients and other brokers
    sasl_users: dict[str, str] = field(default_factory=dict)  # kchaos.sasl.users
    sasl_login: tuple[str, str] | None = None  # (username, password) this node logs in with
    authorizer: bool = False
    super_users: frozenset[str] = frozenset()
    allow_everyone_if_no_acl_found: bool = False
    settings: dict[str, str] = field(default_factory=dict)  # every key as given, for component configs
    bugs: Bugs = NO_BUGS  # kchaos.bugs: planted bugs (node/bugs.py), only with kchaos.test.cluster=true

    @property
    def is_voter(self) -> bool:
        return self.raft.is_voter

    def voter_address(self, node_id: int) -> VoterAddress | None:
        return next((v for v in self.voters if v.node_id == node_id), None)

    controller_security_protocol: str = "PLAINTEXT"  # the controllers' listener, as this node reaches it
    segment_bytes: int = DEFAULT_SEGMENT_BYTES  # metadata.log.segment.bytes: when the log rolls to a new file


class _Props:
    """Last-wins lookup over parsed entries, with `file:line` for messages."""

    def __init__(self, entries: list[Property], source: str) -> None:
        self.source = source
        self.entries: dict[str, Property] = {}
        self.warnings: list[str] = []
        for entry in entries:
            if entry.key in self.entries:
                first = self.entries[entry.key].line
                self.warnings.append(
                    f"{source}:{entry.line}: key '{entry.key}' repeats line {first}; the last value wins"
                )
            self.entries[entry.key] = entry

    def where(self, key: str) -> str:
        entry = self.entries.get(key)
        return f"{self.source}:{entry.line}" if entry else self.source

    def get(self, key: str) -> str | None:
        entry = self.entries.get(key)
        return entry.value if entry else None

    def require(self, key: str, *alternatives: str) -> tuple[str, str]:
        """The value of the first present key among `key, *alternatives`, and which key it was."""
        for name in (key, *alternatives):
            value = self.get(name)
            if value is not None:
                if not value:
                    raise ConfigError(f"{self.where(name)}: {name} is empty")
                return name, value
        names = " or ".join(f"'{n}'" for n in (key, *alternatives))
        raise ConfigError(f"{self.source}: missing required key {names}")

    def error(self, key: str, problem: str) -> ConfigError:
        return ConfigError(f"{self.where(key)}: {key}: {problem}")

    def integer(self, key: str, minimum: int, default: int | None = None) -> int | None:
        value = self.get(key)
        if value is None:
            return default
        try:
            number = int(value)
        except ValueError:
            raise self.error(key, f"'{value}' is not an integer") from None
        if number < minimum:
            raise self.error(key, f"{number} must be >= {minimum}")
        return number

    def boolean(self, key: str) -> bool:
        value = self.get(key)
        if value is None:
            return False
        if value.lower() not in ("true", "false"):
            raise self.error(key, f"'{value}' is not true or false")
        return value.lower() == "true"


def _host_port(props: _Props, key: str, text: str) -> tuple[str, int]:
    host, sep, port_text = text.rpartition(":")
    host = host.strip("[]")
    try:
        port = int(port_text)
    except ValueError:
        port = -1
    if not sep or not 0 <= port < 65536:
        raise props.error(key, f"'{text}' is not host:port")
    return host, port


SECURITY_PROTOCOLS = ("PLAINTEXT", "SASL_PLAINTEXT")


def _protocol_of(name: str, protocols: dict[str, str]) -> str:
    """A listener's protocol: the map's entry, else the name itself when it is a protocol's name."""
    return protocols.get(name, name if name in SECURITY_PROTOCOLS else "PLAINTEXT")


def _protocol_map(props: _Props) -> dict[str, str]:
    value = props.get("listener.security.protocol.map") or ""
    out: dict[str, str] = {}
    for part in (p.strip() for p in value.split(",")):
        if not part:
            continue
        name, sep, protocol = part.partition(":")
        if not sep or protocol not in SECURITY_PROTOCOLS:
            raise props.error(
                "listener.security.protocol.map", f"'{part}' is not NAME:PROTOCOL with {'/'.join(SECURITY_PROTOCOLS)}"
            )
        out[name] = protocol
    return out


def _listeners(props: _Props) -> dict[str, Listener]:
    value = props.get("listeners")
    if value is None:
        return {}
    protocols = _protocol_map(props)
    out: dict[str, Listener] = {}
    for part in (p.strip() for p in value.split(",")):
        if not part:
            continue
        name, sep, address = part.partition("://")
        if not sep or not name:
            raise props.error("listeners", f"'{part}' is not NAME://host:port")
        host, port = _host_port(props, "listeners", address)
        if name in out:
            raise props.error("listeners", f"listener name {name} appears twice")
        out[name] = Listener(name, host or "0.0.0.0", port, _protocol_of(name, protocols))
    return out


def _controller_protocol(props: _Props) -> str:
    """Every controller uses the listener named first in controller.listener.names; its protocol
    comes from the map, so a broker knows how to log in to the controllers without listening there."""
    names = [n.strip() for n in (props.get("controller.listener.names") or "").split(",") if n.strip()]
    if not names:
        return "PLAINTEXT"
    return _protocol_of(names[0], _protocol_map(props))


def _broker_listeners(props: _Props, roles: frozenset[str]) -> tuple[Listener, ...]:
    if "broker" not in roles:
        return ()
    names = {n.strip() for n in (props.get("controller.listener.names") or "").split(",") if n.strip()}
    found = tuple(lsn for name, lsn in _listeners(props).items() if name not in names)
    if not found:
        raise props.error("listeners", "a broker needs a listener besides the controller listener")
    return found


def _sasl_users(props: _Props) -> dict[str, str]:
    try:
        return parse_users(props.get("kchaos.sasl.users") or "", props.where("kchaos.sasl.users"))
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def _sasl_login(props: _Props) -> tuple[str, str] | None:
    username, password = props.get("kchaos.sasl.username"), props.get("kchaos.sasl.password")
    if username is None and password is None:
        return None
    if not username or password is None:
        raise props.error("kchaos.sasl.username", "needs kchaos.sasl.password beside it (and the other way round)")
    return username, password


def _super_users(props: _Props) -> frozenset[str]:
    value = props.get("super.users") or ""
    users = [u.strip() for u in value.split(";") if u.strip()]
    bad = [u for u in users if not u.startswith("User:") or u == "User:"]
    if bad:
        raise props.error("super.users", f"'{bad[0]}' is not User:name")
    return frozenset(users)


def _voters(props: _Props) -> tuple[VoterAddress, ...]:
    kafka, kip = props.get("controller.quorum.voters"), props.get("quorum.voters")
    if kafka is not None and kip is not None and parse_voters(kafka) != parse_voters(kip):
        raise props.error("quorum.voters", "differs from controller.quorum.voters; give only one")
    key, value = props.require("controller.quorum.voters", "quorum.voters")
    try:
        return parse_voters(value, key)
    except ConfigError as exc:
        raise ConfigError(f"{props.where(key)}: {exc}") from None


def _roles(props: _Props) -> frozenset[str]:
    _, value = props.require("process.roles")
    roles = [r.strip() for r in value.split(",") if r.strip()]
    if roles == ["both"]:  # shorthand accepted by kraft-chaos
        roles = list(ROLES)
    bad = [r for r in roles if r not in ROLES]
    if bad or not roles:
        raise props.error("process.roles", f"'{value}' must be controller, broker or both")
    return frozenset(roles)


def _node_id(props: _Props) -> int:
    key, _ = props.require("node.id", "broker.id")
    node_id = props.integer(key, 0)
    other = props.integer("broker.id", 0) if key == "node.id" else None
    if other is not None and other != node_id:
        raise props.error("broker.id", f"{other} differs from node.id {node_id}")
    assert node_id is not None
    return node_id


def _controller_listener(
    props: _Props, node_id: int, roles: frozenset[str], voters: tuple[VoterAddress, ...]
) -> Listener | None:
    listeners = _listeners(props)
    names_value = props.get("controller.listener.names")
    names = [n.strip() for n in (names_value or "").split(",") if n.strip()]
    me = next((v for v in voters if v.node_id == node_id), None)
    if "controller" not in roles:
        if me is not None:
            raise props.error("process.roles", f"node {node_id} is in the voters but process.roles has no controller")
        # An observer needs no listener; if it has one, it serves DescribeQuorum/metrics there.
        others = [lsn for n, lsn in listeners.items() if n not in names]
        return others[0] if others else None
    if me is None:
        key = "controller.quorum.voters" if props.get("controller.quorum.voters") else "quorum.voters"
        raise props.error(key, f"node.id {node_id} is a controller but is not among the voters")
    if not names:
        props.require("controller.listener.names")
    if "listeners" not in props.entries:
        props.require("listeners")
    name = names[0]
    listener = listeners.get(name)
    if listener is None:
        raise props.error("listeners", f"no listener named {name} (from controller.listener.names)")
    if listener.port != me.port:
        raise props.error(
            "listeners", f"{name} port {listener.port} differs from this voter's port {me.port} in the voters"
        )
    if listener.host not in ("0.0.0.0", "::", me.host):
        raise props.error(
            "listeners", f"{name} host {listener.host} differs from this voter's host {me.host} in the voters"
        )
    return listener


def _data_dir(props: _Props) -> Path:
    key, value = props.require("metadata.log.dir", "log.dirs", "log.dir")
    first = value.split(",")[0].strip()
    if not first:
        raise props.error(key, "no directory given")
    return Path(first)


def _bugs(props: _Props) -> Bugs:
    """`kchaos.bugs`, refused unless `kchaos.test.cluster=true` says this is a throw-away test cluster."""
    try:
        bugs = parse_bugs(props.get(BUGS_KEY))
    except UnknownBugError as exc:
        raise props.error(BUGS_KEY, str(exc)) from None
    problem = refusal(bugs, props.boolean(TEST_CLUSTER_KEY))
    if problem is not None:
        raise props.error(BUGS_KEY, problem)
    return bugs


def _raft(props: _Props, node_id: int, voters: tuple[VoterAddress, ...], bugs: Bugs = NO_BUGS) -> RaftConfig:
    settings: dict[str, int] = {}
    for key, attr in TIMEOUT_KEYS.items():
        value = props.integer(key, 1)
        if value is None:
            continue
        if attr in settings and settings[attr] != value:
            raise props.error(key, f"{value} conflicts with another spelling of the same setting")
        settings[attr] = value
    if settings.get("retry_backoff_ms", 0) > settings.get("retry_backoff_max_ms", 1 << 62):
        raise props.error("quorum.retry.backoff.ms", "is larger than quorum.retry.backoff.max.ms")
    pre_vote = props.get(PRE_VOTE_KEY) is None or props.boolean(PRE_VOTE_KEY)
    try:
        return RaftConfig(
            node_id=node_id, voter_ids=frozenset(v.node_id for v in voters), bugs=bugs, pre_vote=pre_vote, **settings
        )
    except ConfigError as exc:
        raise ConfigError(f"{props.source}: {exc}") from None


def _metrics(props: _Props) -> tuple[str, int] | None:
    value = props.get("metrics.listener")
    if value is None:
        return None
    address = value.removeprefix("http://").rstrip("/")
    host, port = _host_port(props, "metrics.listener", address)
    return host or "0.0.0.0", port


def _cluster_id(props: _Props) -> str | None:
    value = props.get("cluster.id")
    if value is None:
        return None
    if not value or any(c.isspace() for c in value):
        raise props.error("cluster.id", f"'{value}' must be a non-empty word")
    return value


def build_server_config(entries: list[Property], source: str) -> ServerConfig:
    props = _Props(entries, source)
    node_id = _node_id(props)
    roles = _roles(props)
    voters = _voters(props)
    listener = _controller_listener(props, node_id, roles, voters)
    data_dir = _data_dir(props)
    bugs = _bugs(props)
    raft = _raft(props, node_id, voters, bugs)
    later = {key: props.integer(key, 1, default) for key, default in LATER_INT_KEYS.items()}
    warnings = props.warnings + [
        f"{source}:{entry.line}: unknown key '{key}' is ignored"
        for key, entry in props.entries.items()
        if key not in KNOWN_KEYS
    ]
    return ServerConfig(
        source=source,
        node_id=node_id,
        roles=roles,
        listener=listener,
        voters=voters,
        data_dir=data_dir,
        cluster_id=_cluster_id(props),
        raft=raft,
        metrics_address=_metrics(props),
        metrics_window_ms=props.integer("metrics.sample.window.ms", 1, 30_000) or 30_000,
        max_frame_bytes=props.integer("socket.request.max.bytes", 1024, 104_857_600) or 104_857_600,
        test_append=props.boolean("kchaos.test.append.enable"),
        later={k: v for k, v in later.items() if v is not None},
        warnings=tuple(warnings),
        broker_listeners=_broker_listeners(props, roles),
        controller_security_protocol=_controller_protocol(props),
        sasl_users=_sasl_users(props),
        sasl_login=_sasl_login(props),
        authorizer=bool(props.get("authorizer.class.name")),
        super_users=_super_users(props),
        allow_everyone_if_no_acl_found=props.boolean("allow.everyone.if.no.acl.found"),
        settings={key: entry.value for key, entry in props.entries.items()},
        segment_bytes=props.integer("metadata.log.segment.bytes", 1024, DEFAULT_SEGMENT_BYTES) or DEFAULT_SEGMENT_BYTES,
        bugs=bugs,
    )


def load_server_config(path: str | Path) -> ServerConfig:
    """Read and check a server.properties file; raises ConfigError naming the key and file:line."""
    return build_server_config(read_properties(path), str(path))
