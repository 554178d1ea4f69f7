"""The `quorum.*` settings of KIP-595, with Kafka's defaults."""

from __future__ import annotations

from dataclasses import dataclass

from node.bugs import NO_BUGS, Bugs


class ConfigError(ValueError):
    """A bad or missing setting; the message names the key."""


@dataclass(frozen=True, slots=True)
class VoterAddress:
    node_id: int
    host: str
    port: int


def parse_voters(value: str, key: str = "quorum.voters") -> tuple[VoterAddress, ...]:
    """Parse `1@host:9092,2@host:9093` into addresses."""
    voters = []
    for part in (p.strip() for p in value.split(",")):
        if not part:
            continue
        try:
            node, addr = part.split("@", 1)
            host, port = addr.rsplit(":", 1)
            host = host.strip("[]")
            voter = VoterAddress(int(node), host, int(port))
        except ValueError:
            raise ConfigError(f"{key}: '{part}' is not of the form id@host:port") from None
        if voter.node_id < 0 or not 0 < voter.port < 65536 or not host:
            raise ConfigError(f"{key}: '{part}' has an invalid id, host or port")
        voters.append(voter)
    if not voters:
        raise ConfigError(f"{key}: no voters given")
    ids = [v.node_id for v in voters]
    if len(set(ids)) != len(ids):
        raise ConfigError(f"{key}: a voter id appears twice")
    return tuple(voters)


@dataclass(frozen=True, slots=True)
class RaftConfig:
    node_id: int
    voter_ids: frozenset[int]
    fetch_timeout_ms: int = 2000  # quorum.fetch.timeout.ms
    election_timeout_ms: int = 1000  # quorum.election.timeout.ms
    election_backoff_max_ms: int = 1000  # quorum.election.backoff.max.ms
    request_timeout_ms: int = 2000  # quorum.request.timeout.ms
    retry_backoff_ms: int = 20  # quorum.retry.backoff.ms
    retry_backoff_max_ms: int = 1000  # quorum.retry.backoff.max.ms
    fetch_max_wait_ms: int = 500  # how long a leader parks a Fetch with nothing new to send
    fetch_max_bytes: int = 1 << 20
    append_max_records: int = 10_000  # records per batch when concurrent appends are grouped
    # KIP-996: ask for pre-votes before bumping the epoch. Kafka has no setting for it (it is on once
    # every voter speaks VoteRequest v2); off only to measure what it changes.
    pre_vote: bool = True
    bugs: Bugs = NO_BUGS  # planted bugs switched on (node/bugs.py); empty in every real deployment

    def __post_init__(self) -> None:
        for name in (
            "fetch_timeout_ms",
            "election_timeout_ms",
            "election_backoff_max_ms",
            "request_timeout_ms",
            "retry_backoff_ms",
            "retry_backoff_max_ms",
        ):
            if getattr(self, name) <= 0:
                raise ConfigError(f"quorum.{name.removesuffix('_ms').replace('_', '.')}.ms must be > 0")
        if not self.voter_ids:
            raise ConfigError("quorum.voters: no voters given")

    @property
    def is_voter(self) -> bool:
        return self.node_id in self.voter_ids

    @property
    def majority(self) -> int:
        return len(self.voter_ids) // 2 + 1

    # Kafka's property names, for config files and `kchaos sim` flags.
    PROPERTY_NAMES = {
        "quorum.fetch.timeout.ms": "fetch_timeout_ms",
        "quorum.election.timeout.ms": "election_timeout_ms",
        "quorum.election.backoff.max.ms": "election_backoff_max_ms",
        "quorum.request.timeout.ms": "request_timeout_ms",
        "quorum.retry.backoff.ms": "retry_backoff_ms",
        "quorum.retry.backoff.max.ms": "retry_backoff_max_ms",
    }
