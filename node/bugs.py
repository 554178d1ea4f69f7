"""Planted bugs: deliberate defects in the node, each behind a switch that is off by default.

A chaos harness is only as good as the bugs it catches, and the only way to know which it catches
is to break the node on purpose, one rule at a time, and see whether a run notices. Each entry below
is shaped like a real defect (most are Kafka bugs that shipped, named by their JIRA) and says which
KIP rule it breaks and which client-visible guarantee a checker should then see broken. The code
that misbehaves is one `if "<name>" in config.bugs:` at the spot where the real defect lived, so the
correct code reads as before and a bug cannot leak into a run that did not ask for it.

Switching bugs on: `kchaos.bugs=name1,name2` in server.properties (refused unless the same file says
`kchaos.test.cluster=true`; see `refusal`), `ClusterConfig(bugs=...)` in the simulator, `--bug NAME`
on `kchaos run`, and `kchaos bugs` runs the whole catalogue. This module is pure (no I/O): the node's
core imports it; runtimes log `warning_lines` when a bug is on.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

BUGS_KEY = "kchaos.bugs"
TEST_CLUSTER_KEY = "kchaos.test.cluster"

COMPONENTS = ("raft", "controller", "broker", "metadata", "storage")


@dataclass(frozen=True, slots=True)
class PlantedBug:
    name: str
    component: str  # one of COMPONENTS
    rule: str  # the KIP rule the defect breaks
    reference: str  # the real defect it is shaped after (KAFKA-nnnnn), or the KIP section
    guarantee: str  # what a client (or a checker of the run) sees broken
    defect: str  # what the code does wrong, in one line


CATALOGUE: tuple[PlantedBug, ...] = (
    # --- Raft (node/raft/) ---------------------------------------------------------------------------
    PlantedBug(
        "raft-hwm-before-leader-change-committed",
        "raft",
        "KIP-595 Fetch: the leader's high watermark may not advance until an entry of its own epoch "
        "(the LeaderChange record) is committed (Raft's Figure-8 rule)",
        "KAFKA-12619",
        "committed entries are final: an entry reported committed is later overwritten (committed "
        "loss, divergent committed logs)",
        "a new leader commits older-epoch entries as soon as a majority holds them",
    ),
    PlantedBug(
        "raft-leader-reelected-same-epoch",
        "raft",
        "KIP-595 quorum state: a voter that was leader restarts resigned and may lead only a later epoch",
        "KAFKA-10527",
        "log matching / committed entries final: after losing its unflushed tail, the restarted leader "
        "writes different entries under (offset, epoch) pairs its followers already hold",
        "a restarted leader counts the votes of its old epoch as still granted and leads that epoch again",
    ),
    PlantedBug(
        "raft-leader-never-resigns",
        "raft",
        "KIP-595 Leader Progress Timeout: a leader without Fetches from a majority for "
        "quorum.fetch.timeout.ms starts an election",
        "KAFKA-15489",
        "liveness: observers (brokers) that still reach the old leader follow a zombie that can commit "
        "nothing; their writes and heartbeats go nowhere until the partition heals",
        "the leader's check-quorum timer only re-arms itself",
    ),
    PlantedBug(
        "raft-vote-not-persisted",
        "raft",
        "KIP-595 Vote Request Handling: a voter persists its vote (votedId) before granting it",
        "KIP-595 Vote Request Handling; Raft Figure 2 (votedFor is persistent state)",
        "election safety: a voter restarted within an election votes again in the same epoch, and two "
        "leaders are elected in one epoch",
        "the quorum-state written on granting a vote carries the new epoch but no votedId",
    ),
    PlantedBug(
        "raft-follower-fetch-before-flush",
        "raft",
        "KIP-595 Fetch: a voter's fetch offset acknowledges its log, so it fetches only what it has fsynced",
        "KAFKA-10533 (and KAFKA-13884)",
        "durability: a write acknowledged as committed rests on a majority of page caches, not disks, "
        "and a power loss takes it",
        "a follower sends its next Fetch as soon as it has appended, before its fsync returns",
    ),
    PlantedBug(
        "raft-read-barrier-counts-late-fetches",
        "raft",
        "KIP-595 linearizable reads: a leader confirms its leadership for a read with a majority that "
        "was still in its epoch after the read arrived",
        "etcd-io/etcd#741 (ReadIndex confirmation); this project's own finding under SIGSTOP",
        "linearizable reads: a leader thawed after SIGSTOP answers a read from stale state, confirmed "
        "by Fetches that were sent before it froze (and before another leader committed writes)",
        "a read barrier completes on a majority of Fetches processed after it, whenever they were sent",
    ),
    PlantedBug(
        "raft-vote-older-epoch-granted",
        "raft",
        "KIP-595 Vote Request Handling 2: a VoteRequest of an epoch older than the voter's is rejected "
        "(FENCED_LEADER_EPOCH)",
        "KIP-595 Vote Request Handling; Raft Figure 2 (RequestVote: reply false if term < currentTerm)",
        "election safety: a voter moves back to an old epoch and votes in it, so a second leader can be "
        "elected in an epoch that already has one (epochs go backwards)",
        "the voter skips the epoch comparison; an unattached voter grants an older candidate and moves "
        "back to its epoch",
    ),
    PlantedBug(
        "raft-vote-granted-twice-in-epoch",
        "raft",
        "KIP-595 Vote Request Handling 3: a voter that voted in an epoch grants that epoch's vote to no "
        "other candidate",
        "KIP-595 Vote Request Handling; Raft Figure 2 (votedFor)",
        "election safety: two candidates of one epoch both win a majority, two leaders in one epoch",
        "a voter that already voted judges a second candidate of the same epoch by its log alone",
    ),
    PlantedBug(
        "raft-election-majority-off-by-one",
        "raft",
        "KIP-595 Vote Response Handling 2: a candidate becomes leader once a majority of the voters "
        "(itself included) granted their votes",
        "KIP-595 Vote Response Handling; the classic quorum-size off-by-one (n / 2 instead of n / 2 + 1)",
        "election safety: with an even half of the votes (one of three: its own) a candidate leads, so a "
        "cut-off voter elects itself and two candidates of one epoch both lead",
        "the votes needed are counted as half the voters, rounded down",
    ),
    PlantedBug(
        "raft-leader-ignores-last-fetched-epoch",
        "raft",
        "KIP-595 Fetch Request Handling 3: a fetch whose LastFetchedEpoch is inconsistent with the "
        "leader's log gets an empty answer with a DivergingEpoch, and acknowledges nothing",
        "KAFKA-1211 (truncation by offset alone, fixed by KIP-101's leader epochs)",
        "log matching and committed entries final: a follower keeps a divergent tail under the leader's "
        "entries, and its fetch offset counts towards commits of entries it does not hold",
        "the leader serves a fetch at its offset without comparing the fetcher's last epoch with its log",
    ),
    PlantedBug(
        "raft-follower-truncates-to-leader-epoch-end",
        "raft",
        "KIP-595 Fetch Response Handling 2: a follower told of a DivergingEpoch truncates to the smaller of "
        "the leader's end offset for that epoch and its own",
        "KAFKA-6361 (KIP-279: fast leader failover leaves the follower's log diverged)",
        "progress: a follower that copied a deposed leader's tail keeps it, is answered the same "
        "DivergingEpoch for ever and never catches up again",
        "the follower truncates to the leader's end offset of the epoch, ignoring where its own ends",
    ),
    PlantedBug(
        "raft-describe-quorum-answered-by-non-leader",
        "raft",
        "KIP-595 DescribeQuorum Request Handling: only the leader answers; any other node answers "
        "NOT_LEADER_OR_FOLLOWER with the leader it knows",
        "KIP-595 DescribeQuorum Request Handling",
        "a DescribeQuorum answer is the leader's: a tool (or a broker) is told the leader, epoch and high "
        "watermark from a follower's possibly stale view, as if they were current",
        "a non-leader answers DescribeQuorum without an error, from its own view",
    ),
    PlantedBug(
        "raft-vote-skips-log-up-to-date-check",
        "raft",
        "KIP-595 Vote Request Handling: a voter grants its vote only to a candidate whose log is at "
        "least as up to date as its own (last epoch, then end offset)",
        "KIP-595 Vote Request Handling; Raft §5.4.1 (election restriction)",
        "committed entries are final: a candidate missing committed entries is elected and truncates "
        "them on its followers (committed loss, divergent committed logs). Pre-vote (KIP-996) checks "
        "the log too and filters most such candidates, so runs need pre_vote = false to see it",
        "the Vote handler grants a real (not pre-) vote without comparing the candidate's log with its own",
    ),
    PlantedBug(
        "raft-begin-epoch-accepts-older-epoch",
        "raft",
        "KIP-595 BeginQuorumEpoch Request Handling: a request whose epoch is smaller than the voter's "
        "current epoch is rejected with FENCED_LEADER_EPOCH",
        "KIP-595 BeginQuorumEpoch Request Handling",
        "election safety: a BeginQuorumEpoch delivered late (the redeliver fault's stale copies) takes "
        "the voter back to an old epoch and leader, forgetting the vote it gave in the newer one",
        "the BeginQuorumEpoch handler follows the sender without comparing its epoch with its own",
    ),
    PlantedBug(
        "raft-candidate-outbids-higher-epoch",
        "raft",
        "KIP-595 Vote handling: a candidate that sees a higher epoch (a VoteRequest or a VoteResponse) "
        "steps down to it and may grant that epoch's candidate its vote",
        "Raft section 5.2 (a candidate that discovers a higher term becomes a follower)",
        "liveness: two voters standing at once outbid each other epoch after epoch and neither gets a "
        "vote, so a quorum with only those two up keeps electing (a live-lock) while writes wait",
        "a candidate or prospective voter that learns of a higher epoch with no leader stands again "
        "in the epoch above it instead of stepping down",
    ),
    PlantedBug(
        "raft-end-quorum-epoch-ignored",
        "raft",
        "KIP-595 EndQuorumEpoch: a voter named a preferred successor stands after a backoff that grows "
        "with its place in the list (at once when first), instead of waiting for its fetch timeout",
        "KIP-595 EndQuorumEpoch handling",
        "availability after a graceful stop: the hand-over is acknowledged but nobody stands until a "
        "fetch timeout, so a controlled shutdown costs as long without a leader as a kill -9",
        "the voter answers EndQuorumEpoch without error and leaves its timers and role as they were",
    ),
    # --- quorum controller (node/controller) ---------------------------------------------------------
    PlantedBug(
        "ctl-fenced-replica-into-isr",
        "controller",
        "KIP-841 / KIP-903: AlterPartition may only add registered, unfenced brokers that are not "
        "shutting down (INELIGIBLE_REPLICA otherwise)",
        "KAFKA-13916 / KAFKA-14617",
        "a fenced or shut-down broker never joins an ISR",
        "the controller accepts any replica of the partition into the ISR",
    ),
    PlantedBug(
        "ctl-stale-alter-partition-answer",
        "controller",
        "KIP-497: a controller whose state is behind the request's leader/partition epochs is stale and "
        "answers NOT_CONTROLLER, never a definite FENCED_LEADER_EPOCH / INVALID_UPDATE_VERSION",
        "KAFKA-14154",
        "AlterPartition as compare-and-set: a request that matches the committed state is refused as "
        "stale by a controller that is behind, and the leader stops proposing",
        "epochs ahead of the controller's view are answered as if the request were stale",
    ),
    PlantedBug(
        "ctl-stale-heartbeat-accepted",
        "controller",
        "KIP-631: a heartbeat carries the broker epoch of its registration; an older one is refused "
        "with STALE_BROKER_EPOCH",
        "KIP-631 Broker Heartbeats; cf. KIP-903 (stale broker epochs)",
        "stale epochs refused: a dead incarnation's heartbeats keep the new registration's session alive",
        "a heartbeat with an older broker epoch is taken as one from the current registration",
    ),
    PlantedBug(
        "ctl-unfence-before-catch-up",
        "controller",
        "KIP-631: a broker is unfenced only once its metadata offset has reached its registration record",
        "KAFKA-13959",
        "unfencing only after catch-up: a broker serves clients from an image that lacks its own registration",
        "any reported metadata offset counts as caught up",
    ),
    PlantedBug(
        "ctl-no-fence-after-failover",
        "controller",
        "KIP-631: every unfenced broker is fenced broker.session.timeout.ms after the last heartbeat "
        "the active controller received, including brokers it never heard from",
        "KAFKA-13841",
        "a broker is fenced within the session timeout after its last heartbeat: after a controller "
        "failover a dead broker stays unfenced (and keeps its leaderships) for ever",
        "a newly active controller tracks only brokers that heartbeat to it",
    ),
    PlantedBug(
        "ctl-config-change-not-atomic",
        "controller",
        "KIP-631: the records of one request go into one batch, so they commit together or not at all",
        "KIP-631 (atomic batches); cf. KIP-868 (metadata transactions)",
        "a config change of several keys is seen half applied, and a request answered with an error "
        "may still have applied part of itself",
        "each ConfigRecord of a request is appended as a batch of its own, once the one before it committed",
    ),
    PlantedBug(
        "ctl-envelope-unauthorized",
        "controller",
        "KIP-590: the controller serves an Envelope only from a forwarder with ClusterAction, then "
        "authorizes the inner request as the client the Envelope names",
        "KAFKA-10181 / KAFKA-12168 (Envelope parsing and authorization split between two layers)",
        "authorization: any authenticated client that can reach a controller runs requests as any "
        "principal it names, super users included",
        "the forwarder's ClusterAction is not checked; only the inner (claimed) principal is",
    ),
    PlantedBug(
        "ctl-read-without-barrier",
        "controller",
        "KIP-595 linearizable reads: the active controller confirms its leadership with a majority "
        "(read barrier) before answering a linearizable read from its image",
        "etcd-io/etcd#741 (stale reads from a deposed leader, Jepsen 2014)",
        "linearizable DescribeConfigs: a deposed controller that still believes it is active answers stale values",
        "DescribeConfigs is answered from the local image at once",
    ),
    PlantedBug(
        "ctl-alter-partition-ignores-partition-epoch",
        "controller",
        "KIP-497: AlterPartition is a compare-and-set on the partition epoch; a request built on an older "
        "state is refused with INVALID_UPDATE_VERSION",
        "KIP-497 (the zkVersion check of AlterIsr)",
        "AlterPartition as compare-and-set: a stale request overwrites a newer ISR (lost updates)",
        "the controller accepts an AlterPartition whatever partition epoch it was built on",
    ),
    PlantedBug(
        "ctl-shutdown-before-leaders-moved",
        "controller",
        "KIP-631 controlled shutdown: the controller answers should_shut_down once the broker leads "
        "nothing (its leaderships move away in the same batch)",
        "KIP-631 Controlled Shutdown",
        "a broker that completed a controlled shutdown leads no partition: with the bug its partitions "
        "stay led by a broker that is stopping (unavailable until it is fenced)",
        "the controller marks the broker as shutting down and tells it to stop, but moves no leadership",
    ),
    # --- broker (node/broker) ------------------------------------------------------------------------
    PlantedBug(
        "broker-forward-resend-ambiguous",
        "broker",
        "KIP-590: a forwarded request whose Envelope got no answer may have been applied; it is never "
        "sent again (at most once), the client is told REQUEST_TIMED_OUT",
        "KIP-590 Request Forwarding",
        "at-most-once writes: a write lost in transit after it committed is applied a second time "
        "(duplicates, a register going back to an older value)",
        "an Envelope that got no answer is queued again like one refused with NOT_CONTROLLER",
    ),
    PlantedBug(
        "broker-read-offset-not-applied",
        "broker",
        "KIP-500 / KIP-631: a read answered from a broker's metadata image carries the offset that image has applied",
        "KAFKA-13836 (advertise an offset only once it is published)",
        "an image read reflects exactly the committed image at the offset it reports, and a broker's "
        "offsets never go back",
        "a broker reports the end of the metadata log it has fetched, not the offset its image applied",
    ),
    # --- metadata (node/metadata/snapshot.py) -----------------------------------------------------------
    PlantedBug(
        "metadata-snapshot-omits-configs",
        "metadata",
        "KIP-630: a snapshot holds the whole state at its end offset; loading it equals replaying the log",
        "KIP-630 Snapshot Format; same class as robot-head/crabka#354 and #356",
        "image agreement: a node that restarts from (or fetches) a snapshot loses every dynamic config",
        "the snapshot writer emits every record kind except ConfigRecords",
    ),
    # --- storage (node/runtime/file_storage.py) ---------------------------------------------------------
    PlantedBug(
        "storage-flush-skips-fsync",
        "storage",
        "KIP-595: the metadata log is fsynced before an append is acknowledged (no group flushing)",
        "KAFKA-10533",
        "durability: acknowledged, committed writes vanish on a power loss of a majority",
        "FileStorage.flush() returns without fdatasync",
    ),
    PlantedBug(
        "storage-quorum-state-rename-without-fsync",
        "storage",
        "KIP-595 quorum state: a vote is durable before it is granted; the file is replaced atomically",
        "KIP-595 Quorum State; ALICE (Pillai et al., OSDI 2014): rename without fsync of the new file",
        "election safety and restartability: after a power loss the quorum-state is empty or old, the "
        "node refuses to start or forgets its vote",
        "the temp file is renamed over quorum-state without an fsync of its data",
    ),
    PlantedBug(
        "storage-segment-roll-no-dir-fsync",
        "storage",
        "KIP-595 durability: a new segment's directory entry is fsynced before its records are acknowledged",
        "KIP-595 (fsync on append); ALICE (Pillai et al., OSDI 2014): file creation without a directory fsync",
        "durability: after a power loss a whole segment of committed records is missing",
        "rolling a new segment does not fsync the log directory",
    ),
    PlantedBug(
        "storage-crc-not-checked-on-load",
        "storage",
        "KIP-595 record batches carry a CRC32C; a corrupt batch is never served or committed",
        "KIP-595 / KIP-98 record batch CRC",
        "integrity: a bit flip on disk is loaded, replicated and applied as if it were a committed record",
        "start-up decodes batches without verifying their CRC32C",
    ),
)

BY_NAME: dict[str, PlantedBug] = {bug.name: bug for bug in CATALOGUE}


class UnknownBugError(ValueError):
    """A bug name the catalogue does not have (the message lists the known ones)."""


def _known(name: str) -> str:
    if name not in BY_NAME:
        raise UnknownBugError(f"unknown planted bug {name!r} (known: {', '.join(sorted(BY_NAME))})")
    return name


@dataclass(frozen=True, slots=True)
class Bugs:
    """The planted bugs switched on in one node (empty: the correct node)."""

    names: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        for name in self.names:
            _known(name)

    def __contains__(self, name: object) -> bool:
        # A misspelt name at a call site would silently never fire: refuse it.
        return _known(str(name)) in self.names

    def __bool__(self) -> bool:
        return bool(self.names)

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self.names))

    def __len__(self) -> int:
        return len(self.names)

    def __str__(self) -> str:
        return ",".join(self)


NO_BUGS = Bugs()


def parse_bugs(value: str | Iterable[str] | Bugs | None) -> Bugs:
    """Bugs from `kchaos.bugs` text ("a,b"), a list of names, or Bugs; UnknownBugError on a bad name."""
    if value is None:
        return NO_BUGS
    if isinstance(value, Bugs):
        return value
    parts = value.split(",") if isinstance(value, str) else list(value)
    names = [p.strip() for p in parts if p.strip() and p.strip() != "none"]
    return Bugs(frozenset(_known(n) for n in names))


def refusal(bugs: Bugs, test_cluster: bool) -> str | None:
    """Why a node with these bugs must not start, or None. The rule: planted bugs run only in a
    cluster that says it is a test cluster (`kchaos.test.cluster=true`, which the harness sets);
    anything else looks like production."""
    if bugs and not test_cluster:
        return (
            f"planted bugs ({bugs}) are refused outside a test cluster: set {TEST_CLUSTER_KEY}=true "
            "only on a throw-away test cluster"
        )
    return None


def warning_lines(bugs: Bugs, node: str | int | None = None) -> list[str]:
    """One loud line per bug switched on, for the node's log at start-up."""
    who = f"node {node}: " if node is not None else ""
    return [
        f"{who}PLANTED BUG ON: {bug.name} ({bug.component}, {bug.reference}): {bug.defect}"
        for bug in (BY_NAME[n] for n in bugs)
    ]


__all__ = [
    "BUGS_KEY",
    "BY_NAME",
    "CATALOGUE",
    "COMPONENTS",
    "NO_BUGS",
    "TEST_CLUSTER_KEY",
    "Bugs",
    "PlantedBug",
    "UnknownBugError",
    "parse_bugs",
    "refusal",
    "warning_lines",
]
