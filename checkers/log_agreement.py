"""Log agreement: every node's committed log tells the same story.

Dump format (one per node; each node writes it at the end of a run). A JSONL file, one committed entry
per line, in offset order:

    {"offset": 0, "epoch": 1, "digest": "9f2c...", "control": true, "leader_id": 1}
    {"offset": 1, "epoch": 1, "digest": "41aa...", "control": false}

- `offset` (int), `epoch` (int): the entry's position and the epoch in which it was appended;
- `digest` (hex string): a digest of the entry's records (any stable hash; equal entries, equal digests);
- `control` (bool, default false): a control batch; a LeaderChange control entry carries `leader_id`
  (the leader that wrote it) so elections are visible in the log itself.
A `.json` file holding a JSON array of the same objects (or `{"entries": [...]}`) is accepted too.

Where the dumps are found: a directory of `<node>.jsonl` / `<node>.json` files, or of
`<node>/committed-log.jsonl` (a run's `nodes/` folder; a run directory containing `nodes/` works).
Observations, optional: JSONL lines `{"node", "time", "epoch", "leader_id", "high_watermark"}` (what a
node reported at a moment, e.g. from DescribeQuorum); by default `observations.jsonl` beside the dumps.
`leader_id` -1 or null means unknown; `high_watermark` null means unknown (Kafka's HWM is the offset
after the last committed entry).

Checks, each a violation when it fails:
- divergence: at any offset every node holding it has the same epoch and digest (the first divergent
  offset and which nodes hold which version are reported);
- gap / offset-order: each node's offsets are contiguous and increasing;
- epoch-order: epochs never decrease along a node's log; nor in a node's observations;
- multiple-leaders: at most one leader per epoch (LeaderChange entries and observations together);
- hwm-regression: a node's observed high watermark never decreases;
- committed-missing: the highest high watermark ever observed is covered by the longest dump.
"""

from __future__ import annotations

import itertools
import json
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from checkers.verdict import UNKNOWN, Verdict

CHECKER = "log-agreement"
DUMP_NAME = "committed-log.jsonl"
OBSERVATIONS_NAME = "observations.jsonl"
MAX_LISTED = 16


class DumpError(ValueError):
    """A dump or observation file that cannot be read; the message names the file and line."""


@dataclass(frozen=True, slots=True)
class LogEntry:
    offset: int
    epoch: int
    digest: str
    control: bool = False
    leader_id: int | None = None


@dataclass(frozen=True, slots=True)
class Observation:
    node: str
    time: int
    epoch: int | None = None
    leader_id: int | None = None
    high_watermark: int | None = None


def _int(obj: Mapping[str, Any], name: str, where: str, optional: bool = False) -> int | None:
    value = obj.get(name)
    if value is None and optional:
        return None
    if type(value) is not int:
        raise DumpError(f"{where}: {name!r} must be an integer, got {value!r}")
    return value


def _mapping(obj: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(obj, Mapping):
        raise DumpError(f"{where}: expected a JSON object, got {type(obj).__name__}")
    return obj


def entry_from(obj: Any, where: str) -> LogEntry:
    if isinstance(obj, LogEntry):
        return obj
    obj = _mapping(obj, where)
    digest = obj.get("digest")
    if not isinstance(digest, str):
        raise DumpError(f"{where}: 'digest' must be a string, got {digest!r}")
    offset = _int(obj, "offset", where)
    epoch = _int(obj, "epoch", where)
    assert offset is not None and epoch is not None
    return LogEntry(
        offset=offset,
        epoch=epoch,
        digest=digest,
        control=bool(obj.get("control", False)),
        leader_id=_int(obj, "leader_id", where, optional=True),
    )


def observation_from(obj: Any, where: str) -> Observation:
    if isinstance(obj, Observation):
        return obj
    obj = _mapping(obj, where)
    node = obj.get("node")
    if node is None:
        raise DumpError(f"{where}: 'node' is missing")
    time = _int(obj, "time", where)
    assert time is not None
    return Observation(
        node=str(node),
        time=time,
        epoch=_int(obj, "epoch", where, optional=True),
        leader_id=_int(obj, "leader_id", where, optional=True),
        high_watermark=_int(obj, "high_watermark", where, optional=True),
    )


def _json_lines(path: Path) -> Iterable[tuple[str, Any]]:
    try:
        text = path.read_text()
    except OSError as exc:
        raise DumpError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if path.suffix == ".json":
        try:
            doc = json.loads(text)
        except ValueError as exc:
            raise DumpError(f"{path}: not valid JSON ({exc})") from None
        items = doc.get("entries") if isinstance(doc, dict) else doc
        if not isinstance(items, list):
            raise DumpError(f"{path}: expected a JSON array of entries")
        for i, item in enumerate(items):
            yield f"{path}: entry {i}", item
        return
    for line_no, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            yield f"{path}:{line_no}", json.loads(line)
        except ValueError as exc:
            raise DumpError(f"{path}:{line_no}: not valid JSON ({exc})") from None


def load_dump(path: str | Path) -> list[LogEntry]:
    return [entry_from(obj, where) for where, obj in _json_lines(Path(path))]


def load_observations(path: str | Path) -> list[Observation]:
    return [observation_from(obj, where) for where, obj in _json_lines(Path(path))]


def find_dumps(directory: str | Path) -> dict[str, Path]:
    """node -> dump file, for the layouts the module docstring lists."""
    root = Path(directory)
    if not root.is_dir():
        raise DumpError(f"{root}: not a directory of log dumps")
    if (root / "nodes").is_dir():
        root = root / "nodes"
    found: dict[str, Path] = {}
    for child in sorted(root.iterdir()):
        if child.is_dir() and (child / DUMP_NAME).is_file():
            found[child.name] = child / DUMP_NAME
        elif child.is_file() and child.suffix in (".jsonl", ".json") and child.name != OBSERVATIONS_NAME:
            found[child.stem] = child
    return found


def load_run(directory: str | Path) -> tuple[dict[str, list[LogEntry]], list[Observation]]:
    """Every node's dump in a directory, and the observations file beside them if there is one."""
    root = Path(directory)
    dumps = {node: load_dump(path) for node, path in find_dumps(root).items()}
    observations: list[Observation] = []
    for candidate in (root / OBSERVATIONS_NAME, root / "nodes" / OBSERVATIONS_NAME):
        if candidate.is_file():
            observations = load_observations(candidate)
            break
    return dumps, observations


@dataclass
class _Findings:
    items: dict[str, list[dict[str, Any]]]

    def add(self, kind: str, finding: dict[str, Any]) -> None:
        self.items.setdefault(kind, []).append(finding)


def _check_node_logs(logs: Mapping[str, list[LogEntry]], findings: _Findings) -> None:
    for node, entries in logs.items():
        for prev, cur in itertools.pairwise(entries):
            if cur.offset <= prev.offset:
                findings.add("offset-order", {"node": node, "offset": cur.offset, "after": prev.offset})
            elif cur.offset != prev.offset + 1:
                findings.add("gap", {"node": node, "after": prev.offset, "next": cur.offset})
            if cur.epoch < prev.epoch:
                findings.add(
                    "epoch-order",
                    {"node": node, "offset": cur.offset, "epoch": cur.epoch, "previous_epoch": prev.epoch},
                )


def _check_divergence(logs: Mapping[str, list[LogEntry]], findings: _Findings) -> None:
    versions: dict[int, dict[tuple[int, str], list[str]]] = defaultdict(lambda: defaultdict(list))
    for node, entries in logs.items():
        for e in entries:
            versions[e.offset][(e.epoch, e.digest)].append(node)
    divergent = sorted(o for o, v in versions.items() if len(v) > 1)
    if divergent:
        first = divergent[0]
        findings.add(
            "divergence",
            {
                "first_offset": first,
                "divergent_offsets": len(divergent),
                "versions": [
                    {"epoch": epoch, "digest": digest, "nodes": sorted(nodes)}
                    for (epoch, digest), nodes in sorted(versions[first].items())
                ],
            },
        )


def _check_leaders(
    logs: Mapping[str, list[LogEntry]], observations: list[Observation], findings: _Findings
) -> dict[int, list[int]]:
    leaders: dict[int, dict[int, list[str]]] = defaultdict(lambda: defaultdict(list))
    for node, entries in logs.items():
        for e in entries:
            if e.control and e.leader_id is not None and e.leader_id >= 0:
                leaders[e.epoch][e.leader_id].append(f"log of {node} at offset {e.offset}")
    for ob in observations:
        if ob.epoch is not None and ob.leader_id is not None and ob.leader_id >= 0:
            leaders[ob.epoch][ob.leader_id].append(f"observed on {ob.node} at time {ob.time}")
    for epoch, by_leader in sorted(leaders.items()):
        if len(by_leader) > 1:
            findings.add(
                "multiple-leaders",
                {
                    "epoch": epoch,
                    "leaders": {str(lid): sources[:MAX_LISTED] for lid, sources in sorted(by_leader.items())},
                },
            )
    return {epoch: sorted(by_leader) for epoch, by_leader in sorted(leaders.items())}


def _check_observations(observations: list[Observation], findings: _Findings) -> int | None:
    """Per node, in time order: HWM and epoch never go back. Returns the highest HWM observed."""
    by_node: dict[str, list[Observation]] = defaultdict(list)
    for ob in observations:
        by_node[ob.node].append(ob)
    highest: int | None = None
    for node, obs in sorted(by_node.items()):
        obs.sort(key=lambda o: o.time)  # stable: file order breaks ties
        hwm: Observation | None = None
        epoch: Observation | None = None
        for ob in obs:
            if ob.high_watermark is not None and ob.high_watermark >= 0:
                if hwm is not None and ob.high_watermark < (hwm.high_watermark or 0):
                    findings.add(
                        "hwm-regression",
                        {
                            "node": node,
                            "from": hwm.high_watermark,
                            "to": ob.high_watermark,
                            "time_from": hwm.time,
                            "time_to": ob.time,
                        },
                    )
                if hwm is None or ob.high_watermark >= (hwm.high_watermark or 0):
                    hwm = ob
                highest = ob.high_watermark if highest is None else max(highest, ob.high_watermark)
            if ob.epoch is not None:
                if epoch is not None and ob.epoch < (epoch.epoch or 0):
                    findings.add(
                        "epoch-order",
                        {"node": node, "from": epoch.epoch, "to": ob.epoch, "time": ob.time},
                    )
                if epoch is None or ob.epoch >= (epoch.epoch or 0):
                    epoch = ob
    return highest


def check_log_agreement(
    dumps: Mapping[str, Iterable[LogEntry | Mapping[str, Any]]] | str | Path,
    observations: Iterable[Observation | Mapping[str, Any]] | str | Path | None = None,
) -> Verdict:
    """Check committed-log dumps (a dict node -> entries, or a directory) and optional observations."""
    default_obs: list[Observation] = []
    if isinstance(dumps, str | Path):
        logs, default_obs = load_run(dumps)
    else:
        logs = {
            str(node): [entry_from(e, f"dump of {node}: entry {i}") for i, e in enumerate(entries)]
            for node, entries in dumps.items()
        }
    if observations is None:
        obs = default_obs
    elif isinstance(observations, str | Path):
        obs = load_observations(observations)
    else:
        obs = [observation_from(o, f"observation {i}") for i, o in enumerate(observations)]

    findings = _Findings({})
    _check_node_logs(logs, findings)
    _check_divergence(logs, findings)
    leaders = _check_leaders(logs, obs, findings)
    highest_hwm = _check_observations(obs, findings)
    longest_end = max((entries[-1].offset + 1 for entries in logs.values() if entries), default=0)
    if highest_hwm is not None and logs and highest_hwm > longest_end:
        findings.add(
            "committed-missing",
            {"highest_high_watermark": highest_hwm, "longest_dump_end": longest_end},
        )
    if findings.items:
        valid: bool | str = False
    elif not logs:
        valid = UNKNOWN
    else:
        valid = True
    details: dict[str, Any] = {
        "nodes": {
            node: {
                "entries": len(entries),
                "first_offset": entries[0].offset if entries else None,
                "last_offset": entries[-1].offset if entries else None,
                "last_epoch": entries[-1].epoch if entries else None,
            }
            for node, entries in sorted(logs.items())
        },
        "observations": len(obs),
        "leaders_by_epoch": {str(epoch): ids for epoch, ids in leaders.items()},
        "violations": sorted(findings.items),
        "findings": {kind: found[:MAX_LISTED] for kind, found in sorted(findings.items.items())},
        "finding_counts": {kind: len(found) for kind, found in sorted(findings.items.items())},
    }
    if not logs:
        details["reason"] = "no log dumps"
    return Verdict(checker=CHECKER, valid=valid, details=details)


def add_check_arguments(parser: Any) -> None:
    group = parser.add_argument_group("log-agreement")
    group.add_argument(
        "--dumps",
        type=Path,
        help="directory of committed-log dumps (default: the history's run directory)",
    )
    group.add_argument("--observations", type=Path, help="leader / high-watermark observations (JSONL)")


def check_from_args(history: Any, args: Any) -> Verdict:
    """The history itself is not needed; its run directory is the default place for the dumps."""
    dumps = getattr(args, "dumps", None)
    if dumps is None:
        source = getattr(args, "history", None) or getattr(history, "source", None)
        dumps = Path(source).parent if source else Path(".")
    return check_log_agreement(dumps, getattr(args, "observations", None))


def summarize(verdict: Verdict) -> list[str]:
    d = verdict.details
    lines = [f"{verdict.checker}: {verdict.valid} ({len(d['nodes'])} nodes, {d['observations']} observations)"]
    for node, info in d["nodes"].items():
        lines.append(
            f"  {node}: {info['entries']} entries, offsets {info['first_offset']}..{info['last_offset']}, "
            f"last epoch {info['last_epoch']}"
        )
    for kind, count in d["finding_counts"].items():
        lines.append(f"  {kind}: {count}  e.g. {json.dumps(d['findings'][kind][0], default=str)}")
    if d.get("reason"):
        lines.append(f"  {d['reason']}")
    return lines
