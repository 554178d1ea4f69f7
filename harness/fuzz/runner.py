"""The fuzz loop: targets, a budget, a seed, and the count of what was tried and found.

Each target is a function that runs one input drawn from the run's `random.Random` and returns
nothing (the input kept the contract) or raises `Finding`. Targets:

- `controller` / `broker`: a request frame of every type the listener serves (and, at times, a type it
  does not, or a response) to the combined node of examples/combined.properties, in process;
- `clients`: the same node with two more brokers and two topics, and requests of every API sampled with
  hints from its metadata image (topic ids, broker epochs, partition epochs, ISRs, config names)
  (`harness/fuzz/clients.py`);
- `responses`: answers of every response type (right or wrong type, mutated) to whatever node 1 of a
  three-voter combined quorum sends;
- `peers`: the same node, with voters 2 and 3 sending requests and answers built from its state
  (epochs, offsets, batches, diverging epochs, a real leader's snapshot), damaged at times
  (`harness/fuzz/peers.py`);
- `files`: a real data dir (log segments, snapshot, quorum-state, meta.properties) with one file
  damaged, loaded by FileStorage and the node built on it, as a restart does;
- `harness`: the harness's own inputs: test TOML, suite files, histories, inventories.

Each target runs in episodes: a fresh target built from an episode seed drawn from the run's seed,
fed up to `RESET_EVERY` inputs drawn from that episode's own `random.Random`. A finding is kept
with its `ReplayKey` (target, episode seed, input number in the episode), so `replay` rebuilds one
episode and reaches it in at most `RESET_EVERY` inputs, whatever the run's length. The first finding
of each distinct message is kept.
"""

from __future__ import annotations

import json
import random
import re
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import node.raft.actions as A
from harness.fuzz.clients import ClientsTarget
from harness.fuzz.describe import clip, describe_frame, describe_node
from harness.fuzz.inprocess import (
    COMBINED,
    ROOT,
    DesignedStop,
    Finding,
    NodeUnderTest,
    first_of_three_voters,
)
from harness.fuzz.kafka import KafkaTarget
from harness.fuzz.mutate import mutate_bytes, mutate_file, mutate_value, sample, sample_batches
from harness.fuzz.peers import PeersTarget
from node.process.process import CONTROLLER_LISTENER
from node.protocol.codec import BinaryCodec
from node.protocol.messages import SnapshotId
from node.protocol.registry import API_KEYS, BROKER_API_KEYS, CONTROLLER_API_KEYS, REQUESTS, RESPONSE_FOR, RESPONSES
from node.raft.node import RaftNode
from node.raft.quorum_state import QuorumStateData
from node.raft.records import RecordBatch
from node.raft.storage import StorageError
from node.runtime.file_storage import FileStorage

RESET_EVERY = 3000  # inputs in one episode: then the target starts again, fresh (bounded memory and replay)
PROBE_EVERY = 100  # inputs between checks that the node still answers a fresh client
_CODEC = BinaryCodec()


@dataclass(frozen=True)
class ReplayKey:
    """Where a finding happened: input `input` (1-based) of the `target` episode built from `seed`."""

    target: str
    seed: int
    input: int

    def __str__(self) -> str:
        return f"{self.target}:{self.seed}:{self.input}"

    @classmethod
    def parse(cls, text: str) -> ReplayKey:
        """`TARGET:SEED:INPUT`, as the run printed it; ValueError says what is wrong, in one line."""
        parts = text.split(":")
        if len(parts) != 3:
            raise ValueError(f"expected TARGET:SEED:INPUT (e.g. responses:123:45), got {text!r}")
        target, seed, number = parts
        if target not in TARGETS:
            raise ValueError(f"unknown target {target!r} (one of {', '.join(TARGETS)})")
        try:
            key = cls(target, int(seed), int(number))
        except ValueError:
            raise ValueError(f"SEED and INPUT must be integers, got {text!r}") from None
        if not 0 <= key.seed < 2**32 or not 1 <= key.input <= RESET_EVERY:
            raise ValueError(f"SEED is 0..{2**32 - 1} and INPUT 1..{RESET_EVERY}, got {text!r}")
        return key


class Target(Protocol):
    """One episode of a target: each call is one input drawn from `rng`; True if it was accepted,
    False if refused as the contract wants; `Finding` if it broke the contract."""

    def __call__(self, rng: random.Random) -> bool: ...

    def last_input(self) -> list[str]:
        """The last input, readable (lines), for a replayed finding."""
        ...

    def state(self) -> str:
        """What the target's node (or file) looked like after the last input, in one line."""
        ...


@dataclass
class TargetStats:
    inputs: int = 0
    refused: int = 0  # refused with a one-line error (frame or file), as the contract wants
    findings: int = 0


@dataclass
class FoundKind:
    """One kind of finding (`finding_kind`): where to replay its first input, that input's message,
    and how many inputs found it."""

    key: ReplayKey
    first: str
    count: int = 1


@dataclass
class Report:
    seed: int
    stats: dict[str, TargetStats] = field(default_factory=dict)
    findings: dict[str, FoundKind] = field(default_factory=dict)  # by kind, in the order first found
    seconds: float = 0.0

    @property
    def inputs(self) -> int:
        return sum(s.inputs for s in self.stats.values())

    def lines(self) -> list[str]:
        out = [
            f"seed {self.seed}: {self.inputs} inputs in {self.seconds:.1f} s, {len(self.findings)} distinct findings"
        ]
        for name, s in self.stats.items():
            out.append(f"  {name:<11} {s.inputs:>9} inputs  {s.refused:>9} refused  {s.findings:>5} findings")
        for found in self.findings.values():
            seen = f"{found.count} inputs of this kind, the first: " if found.count > 1 else ""
            out.append(f"  FINDING {found.first} ({seen}replay: kchaos fuzz --replay {found.key})")
        return out


def _encode(message: object, cid: int) -> bytes | None:
    try:
        if type(message) in RESPONSE_FOR.values():
            return _CODEC.encode_response(cid, message)
        return _CODEC.encode_request(cid, message)
    except ValueError:
        return None  # an edge value the codec itself refuses to write: no frame


def mutated_frame(cls: type, rng: random.Random) -> bytes:
    """A frame of `cls`: valid, with edge-valued fields, and/or damaged bytes."""
    message = sample(cls, rng)
    for _ in range(rng.choice((0, 1, 1, 2, 3))):
        message = mutate_value(message, rng)
    cid = rng.choice((1, 0, -1, 2**31 - 1, rng.randint(2, 1000)))
    frame = _encode(message, cid) or _encode(sample(cls, rng), cid)
    assert frame is not None  # a sampled message always encodes (tests/fuzz checks it)
    if rng.random() < 0.4:
        frame = mutate_bytes(frame, rng)
    return frame


class ListenerTarget:
    """Request frames to one listener of the combined node."""

    def __init__(self, listener: str, seed: int) -> None:
        keys = CONTROLLER_API_KEYS if listener == CONTROLLER_LISTENER else BROKER_API_KEYS
        self.listener = listener
        self.classes = [cls for cls in REQUESTS if API_KEYS[cls] in keys]
        self.node = NodeUnderTest.from_properties(COMBINED, seed)
        self.count = 0
        self._last = b""

    def __call__(self, rng: random.Random) -> bool:
        self.count += 1
        roll = rng.random()
        cls = rng.choice(self.classes) if roll < 0.9 else rng.choice(REQUESTS if roll < 0.95 else RESPONSES)
        self._last = frame = mutated_frame(cls, rng)
        accepted = self.node.feed_frame(self.listener, frame, ("fuzz", self.count % 4))
        self.node.advance(rng.choice((0, 1, 10, 100, 600)))
        if self.count % PROBE_EVERY == 0:
            self.node.still_serves()
        return accepted

    def last_input(self) -> list[str]:
        codec = self.node.codecs[self.listener]
        return [f"a frame on the {self.listener} listener", *describe_frame(self._last, codec)]

    def state(self) -> str:
        return describe_node(self.node)


class ResponsesTarget:
    """Mutated answers to the requests node 1 of three voters sends (votes, fetches, ...)."""

    def __init__(self, seed: int, workdir: Path) -> None:
        self.workdir = workdir
        self.node = first_of_three_voters(workdir, seed)
        self.count = 0
        self._last: tuple[A.SendRequest, bytes] | None = None

    def __call__(self, rng: random.Random) -> bool:
        self.count += 1
        self.node.advance(rng.choice((10, 100, 500, 2000)))
        if not self.node.outstanding:
            return True
        sent = self.node.outstanding.pop(rng.randrange(len(self.node.outstanding)))
        cls = RESPONSE_FOR.get(type(sent.message))
        if cls is None or rng.random() < 0.05:
            cls = rng.choice(RESPONSES)
        frame = mutated_frame(cls, rng)
        self._last = (sent, frame)
        try:
            accepted = self.node.feed_response(sent, frame)
        except DesignedStop:
            self.node = first_of_three_voters(self.workdir, rng.getrandbits(32))
            return False
        if self.count % PROBE_EVERY == 0:
            self.node.still_serves()
        return accepted

    def last_input(self) -> list[str]:
        if self._last is None:
            return ["no answer yet (the node had sent nothing)"]
        sent, frame = self._last
        head = f"an answer to {clip(repr(sent.message), 300)} sent to node {sent.destination}"
        return [head, *describe_frame(frame, self.node.reply_codec)]

    def state(self) -> str:
        return describe_node(self.node)


class FilesTarget:
    """One damaged file in a real data dir, then a restart: FileStorage.load and the node on top."""

    def __init__(self, seed: int, workdir: Path) -> None:
        self.pristine = workdir / "pristine"
        self.work = workdir / "restart"
        rng = random.Random(seed)
        with FileStorage(self.pristine, 1, segment_bytes=2048) as storage:
            storage.load()
            storage.write_cluster_id("fuzz-cluster-0000000000")
            batches = sample_batches(rng, 40)
            batches = [
                RecordBatch(b.base_offset, min(b.epoch, 3) if b.epoch > 5 else b.epoch, b.records) for b in batches
            ]
            epoch = 0
            fixed = []
            for b in batches:  # epochs never go down along a log
                epoch = max(epoch, b.epoch)
                fixed.append(RecordBatch(b.base_offset, epoch, b.records, b.control, b.timestamp_ms))
            storage.append(tuple(fixed))
            storage.flush()
            storage.write_snapshot(SnapshotId(fixed[10].base_offset, fixed[9].epoch), rng.randbytes(200))
            storage.write_quorum_state(QuorumStateData(1, epoch, 1, 0, (1,)))
        self.files = sorted(p.relative_to(self.pristine) for p in self.pristine.rglob("*") if p.is_file())
        self.config = NodeUnderTest.from_properties(COMBINED, seed).config
        self._last: tuple[Path, bytes, bytes] | None = None

    def __call__(self, rng: random.Random) -> bool:
        shutil.rmtree(self.work, ignore_errors=True)
        shutil.copytree(self.pristine, self.work)
        name = rng.choice(self.files)
        victim = self.work / name
        before = victim.read_bytes()
        after = mutate_file(before, rng)
        self._last = (name, before, after)
        victim.write_bytes(after)
        try:
            with FileStorage(self.work, 1, "fuzz-cluster-0000000000", segment_bytes=2048) as storage:
                loaded = storage.load()
        except StorageError as exc:
            if "\n" in str(exc) or not str(exc):
                raise Finding(f"StorageError of more than one line for {victim.name}") from None
            return False
        except Exception as exc:
            raise Finding(f"loading a damaged {victim.name} raised {exc!r}") from None
        try:
            RaftNode(self.config.raft, loaded, random.Random(1))
        except Exception as exc:
            raise Finding(f"a node on a damaged {victim.name} raised {exc!r}") from None
        return True

    def last_input(self) -> list[str]:
        if self._last is None:
            return ["no file damaged yet"]
        name, before, after = self._last
        return [f"{name} damaged: {len(before)} bytes became {len(after)}", *_byte_changes(before, after)]

    def state(self) -> str:
        return f"a data dir of {len(self.files)} files: {', '.join(map(str, self.files))}"


def _byte_changes(before: bytes, after: bytes) -> list[str]:
    """Where two versions of a file part: the first differing offset and the bytes around it."""
    first = next((i for i, (a, b) in enumerate(zip(before, after)) if a != b), min(len(before), len(after)))
    lo = max(0, first - 8)
    return [
        f"first difference at byte {first}",
        f"was: {before[lo : first + 24].hex(' ', -4)}",
        f"now: {after[lo : first + 24].hex(' ', -4)}",
    ]


def _harness_inputs(workdir: Path) -> dict[str, tuple[str, Callable[[Path], object]]]:
    from checkers.history import load_history
    from harness.backends.inventory import load_inventory
    from harness.suite import load_suite
    from harness.test_spec import load_test

    history = "\n".join(
        json.dumps(e)
        for e in (
            {"index": 0, "time": 1, "process": 0, "type": "invoke", "f": "write", "value": ["k", 1]},
            {"index": 1, "time": 2, "process": 0, "type": "ok", "f": "write", "value": ["k", 1]},
            {"index": 2, "time": 3, "process": "nemesis", "type": "info", "f": "kill", "value": [1]},
        )
    )
    test = 'name = "fuzz"\nworkload = "config-register"\nnemesis = ["partition"]\nseed = 3\ntime_limit_s = 5\n'
    inventory = '[defaults]\nuser = "root"\n[[hosts]]\nname = "n1"\naddress = "127.0.0.1"\n'
    suite = (ROOT / "suites" / "gate.toml").read_text()
    return {
        "test.toml": (test, load_test),
        "suite.toml": (suite, load_suite),
        "history.jsonl": (history, load_history),
        "inventory.toml": (inventory, load_inventory),
    }


class HarnessTarget:
    """The harness's own inputs, damaged: each loader answers a one-line error or loads."""

    def __init__(self, seed: int, workdir: Path) -> None:
        from checkers.history import HistoryError
        from vocab.errors import UserError

        self.workdir = workdir
        self.inputs = _harness_inputs(workdir)
        self.refusals = (UserError, HistoryError)
        self._last: tuple[str, bytes] | None = None

    def __call__(self, rng: random.Random) -> bool:
        name = rng.choice(sorted(self.inputs))
        text, load = self.inputs[name]
        raw = mutate_file(text.encode(), rng)
        if rng.random() < 0.5:  # a textual mutation keeps the format's shape more often than bytes do
            raw = _mutate_text(text, rng).encode()
        path = self.workdir / name
        path.write_bytes(raw)
        self._last = (name, raw)
        try:
            load(path)
        except self.refusals as exc:
            if "\n" in str(exc).strip():
                raise Finding(f"{name}: a refusal of more than one line: {str(exc)[:80]!r}") from None
            return False
        except Exception as exc:
            raise Finding(f"{name}: {exc!r}"[:300]) from None
        return True

    def last_input(self) -> list[str]:
        if self._last is None:
            return ["no input yet"]
        name, raw = self._last
        return [f"{name}, {len(raw)} bytes:", *(clip(line, 200) for line in raw.decode(errors="replace").splitlines())]

    def state(self) -> str:
        return f"loaded by {self.inputs[self._last[0]][1].__name__}" if self._last else "nothing loaded yet"


_TOKENS = (
    '"',
    "=",
    "[",
    "]",
    "{",
    "}",
    "-1",
    "1e400",
    "99999999999999999999",
    "true",
    "null",
    "\n",
    "[[x]]",
    "\\u0000",
    ",",
)


def _mutate_text(text: str, rng: random.Random) -> str:
    for _ in range(rng.randint(1, 3)):
        i = rng.randrange(len(text) + 1)
        if rng.random() < 0.5:
            text = text[:i] + rng.choice(_TOKENS) + text[i:]
        else:
            text = text[:i] + text[i + rng.randint(1, 8) :]
    return text


TARGETS = ("controller", "broker", "clients", "kafka", "responses", "peers", "files", "harness")


def finding_kind(message: str) -> str:
    """A finding's first line with the input's values blanked (numbers, quoted text, cluster ids) and
    its code locations kept: one kind per crash site, whatever the offsets, epochs or ids that showed
    it (the first input of each kind is kept to replay)."""
    line = message.splitlines()[0] if message else ""
    line = re.sub(r"'[^']*'|\"[^\"]*\"", "'…'", line)
    line = re.sub(r"\bcluster (is )?\S+", r"cluster \1…", line)
    parts = re.split(r"(\w+\.py:\d+)", line)  # file:line stays; odd parts are locations
    return "".join(p if i % 2 else re.sub(r"-?\d+", "N", p) for i, p in enumerate(parts))[:300]


def run(
    seed: int,
    budget_s: float | None = None,
    max_inputs: int | None = None,
    targets: tuple[str, ...] = TARGETS,
    progress: Callable[[Report], None] | None = None,
) -> Report:
    """Run the targets in turn (the cheap frame targets more often) until the budget or the count."""
    report = Report(seed, {name: TargetStats() for name in targets})
    episode_seeds = random.Random(seed)  # each target's next episode seed; nothing else draws from it
    # Per cost: a frame takes ~0.5-3 ms in process, a restart on a damaged data dir ~40 ms (real files).
    weights = {
        "controller": 30,
        "broker": 30,
        "clients": 30,
        "kafka": 30,
        "responses": 60,
        "peers": 60,
        "files": 1,
        "harness": 3,
    }
    order = [name for name in targets for _ in range(weights[name])]
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="kchaos-fuzz-") as tmp:
        work = Path(tmp)
        episodes: dict[str, Episode] = {}
        for name in targets:
            (work / name).mkdir()
            episodes[name] = Episode.start(name, episode_seeds.getrandbits(32), work / name)
        last_progress = start
        i = 0
        while True:
            if max_inputs is not None and i >= max_inputs:
                break
            if budget_s is not None and time.monotonic() - start >= budget_s:
                break
            name = order[i % len(order)]
            episode = episodes[name]
            if episode.inputs == RESET_EVERY:
                episode = episodes[name] = Episode.start(name, episode_seeds.getrandbits(32), work / name)
            stats = report.stats[name]
            stats.inputs += 1
            try:
                if not episode.next():
                    stats.refused += 1
            except Finding as finding:
                stats.findings += 1
                kind = f"[{name}] {finding_kind(str(finding))}"
                if kind in report.findings:
                    report.findings[kind].count += 1
                else:
                    first = f"[{name}] {str(finding).splitlines()[0][:300]}"
                    report.findings[kind] = FoundKind(ReplayKey(name, episode.seed, episode.inputs), first)
                episodes[name] = Episode.start(name, episode_seeds.getrandbits(32), work / name)  # start again
            i += 1
            if progress is not None and time.monotonic() - last_progress > 30:
                last_progress = time.monotonic()
                report.seconds = last_progress - start
                progress(report)
    report.seconds = time.monotonic() - start
    return report


@dataclass
class Episode:
    """One target built from `seed`, and the inputs drawn for it from its own stream."""

    name: str
    seed: int
    target: Target
    rng: random.Random
    inputs: int = 0

    @classmethod
    def start(cls, name: str, seed: int, workdir: Path) -> Episode:
        return cls(name, seed, _build(name, seed, workdir), random.Random(f"inputs:{seed}"))

    def next(self) -> bool:
        self.inputs += 1
        return self.target(self.rng)


@dataclass
class Replayed:
    """What a replay saw: the finding (None if the episode kept the contract up to the key's input),
    the input that broke it, its number, and the target's state after it."""

    key: ReplayKey
    finding: Finding | None
    at: int
    input: list[str]
    state: str


def replay(key: ReplayKey) -> Replayed:
    """Rebuild the key's episode and feed it its inputs again, stopping at the first finding (at the
    key's input if the target is deterministic, as every target here is meant to be)."""
    with tempfile.TemporaryDirectory(prefix="kchaos-fuzz-replay-") as tmp:
        episode = Episode.start(key.target, key.seed, Path(tmp))
        while episode.inputs < key.input:
            try:
                episode.next()
            except Finding as finding:
                return Replayed(key, finding, episode.inputs, episode.target.last_input(), episode.target.state())
        return Replayed(key, None, episode.inputs, episode.target.last_input(), episode.target.state())


def _build(name: str, seed: int, workdir: Path) -> Target:
    for child in workdir.iterdir():
        if child.is_dir():
            shutil.rmtree(child)
        else:
            child.unlink()
    match name:
        case "controller":
            return ListenerTarget(CONTROLLER_LISTENER, seed)
        case "broker":
            return ListenerTarget("BROKER", seed)
        case "responses":
            return ResponsesTarget(seed, workdir)
        case "clients":
            return ClientsTarget(seed)
        case "kafka":
            return KafkaTarget(seed)
        case "peers":
            return PeersTarget(seed, workdir)
        case "files":
            return FilesTarget(seed, workdir)
        case "harness":
            return HarnessTarget(seed, workdir)
    raise ValueError(f"unknown fuzz target {name!r} (one of {', '.join(TARGETS)})")
