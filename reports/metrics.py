"""Every metric the reports compute, defined once.

Reading a history (pairing ops, fault windows) is pandas over one run: the Spark pipeline runs it inside
executors (`mapInPandas`, one run at a time) and `reports.per_run` calls it directly, so both paths
share one definition. Per-run aggregates (unavailability, failover/recovery) and aggregates across
runs (quantiles, throughput, info rates) have a pandas form (one run, `reports.per_run`) and a Spark
form (many runs, over the ops table) side by side here, with
the same semantics: quantiles are exact with linear interpolation between closest ranks (position
q * (n - 1)), which is what Spark SQL's `percentile` computes and pandas' default `quantile` does.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from reports.schema import (
    CALM,
    COMPLETIONS,
    HISTORY_COLUMNS,
    INVOKE,
    NEMESIS_PROCESS,
    fault_kind,
    verdict_text,
)

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

NS_PER_MS = 1_000_000
NS_PER_S = 1_000_000_000
QUANTILES = (0.5, 0.9, 0.99, 0.999)
QUANTILE_NAMES = ("p50", "p90", "p99", "p999")
DEFAULT_GAP_MS = 1000.0  # an f with no success for longer than this is "unavailable"
THROUGHPUT_BUCKET_S = 1  # throughput is counted per second of run time

OPS_COLUMNS = (
    "invoke_index",
    "process",
    "f",
    "key",
    "node",
    "outcome",
    "invoke_ns",
    "complete_ns",
    "latency_ms",
    "error",
    "fault_state",
)
FAULT_COLUMNS = ("kind", "targets", "start_index", "start_ns", "end_ns", "healed", "duration_ms")
UNAVAILABILITY_COLUMNS = ("f", "start_ns", "end_ns", "duration_ms", "open_ended", "overlapping_faults")
RECOVERY_COLUMNS = ("kind", "targets", "event", "event_ns", "f", "next_ok_ns", "delay_ms")


class HistoryError(Exception):
    """A history that cannot be read completely (truncated, corrupt or foreign)."""


# ---------------------------------------------------------------------------------------------------
# Reading one history


def _json_text(value: Any) -> str | None:
    """Errors are kept as plain text when they are strings, JSON otherwise."""
    if value is None:
        return None
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def read_jsonl_history(path: str) -> pd.DataFrame:
    """Parse history.jsonl; a line that is not a complete JSON event means the file is truncated."""
    cols: dict[str, list[Any]] = {c: [] for c in HISTORY_COLUMNS}
    with open(path, encoding="utf-8") as fh:
        for line_no, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                event = json.loads(line)
            except json.JSONDecodeError as exc:
                raise HistoryError(f"{path}:{line_no}: not a complete JSON event ({exc.msg})") from None
            if not isinstance(event, dict) or not {"index", "time", "process", "type"} <= event.keys():
                raise HistoryError(f"{path}:{line_no}: not a history event")
            cols["index"].append(int(event["index"]))
            cols["time"].append(int(event["time"]))
            cols["process"].append(str(event["process"]))
            cols["type"].append(str(event["type"]))
            cols["f"].append(None if event.get("f") is None else str(event["f"]))
            value = event.get("value")
            cols["value"].append(None if value is None else json.dumps(value, separators=(",", ":")))
            cols["key"].append(None if event.get("key") is None else str(event["key"]))
            cols["node"].append(None if event.get("node") is None else str(event["node"]))
            cols["error"].append(_json_text(event.get("error")))
    frame = pd.DataFrame(cols, columns=list(HISTORY_COLUMNS))
    return frame.astype({"index": "int64", "time": "int64"})


def read_history(path: str, fmt: str) -> pd.DataFrame:
    """One run's events (HISTORY_COLUMNS), from Parquet or JSONL (with Parquet, `value` is kept for
    nemesis events only)."""
    if fmt == "jsonl":
        return read_jsonl_history(path)
    try:
        table = pq.read_table(path, columns=list(HISTORY_COLUMNS))
    except Exception as exc:  # pyarrow raises several types for damaged files
        raise HistoryError(f"{path}: {exc}") from None
    # Only nemesis values (fault targets) are used; skipping the client ops' values saves most of the
    # conversion to Python strings.
    nemesis = pc.equal(table["process"], NEMESIS_PROCESS)
    values = pc.if_else(nemesis, table["value"].cast(pa.string()), pa.scalar(None, pa.string()))
    return table.set_column(table.schema.get_field_index("value"), "value", values).to_pandas()


# ---------------------------------------------------------------------------------------------------
# Per-run figures


def run_end_ns(events: pd.DataFrame) -> int:
    """The end of a run: the time of its last event."""
    return int(events["time"].max()) if len(events) else 0


def _targets_of(value: str | None) -> list[str] | None:
    if not value:
        return None
    try:
        parsed = json.loads(value)
    except (json.JSONDecodeError, TypeError):
        return None
    if isinstance(parsed, dict) and isinstance(parsed.get("targets"), list):
        return [t if isinstance(t, str) else json.dumps(t, sort_keys=True) for t in parsed["targets"]]
    return None


def fault_windows(events: pd.DataFrame, end_ns: int) -> pd.DataFrame:
    """Nemesis windows: from the completion of start-<kind> to the completion of the next
    stop-<kind> of the same kind, or to the end of the run (healed=False). A start whose completion is
    `fail` (or missing) injected nothing and opens no window."""
    nem = events[events["process"] == NEMESIS_PROCESS].sort_values("index", kind="stable")
    rows: list[dict[str, Any]] = []
    open_windows: dict[str, list[dict[str, Any]]] = {}
    records = nem[["index", "time", "type", "f", "value"]].to_dict("records")
    for i, ev in enumerate(records):
        if ev["type"] != INVOKE or not isinstance(ev["f"], str):
            continue
        parsed = fault_kind(ev["f"])
        done = records[i + 1] if i + 1 < len(records) else None
        if parsed is None or done is None or done["type"] not in COMPLETIONS:
            continue
        action, kind = parsed
        if action == "start":
            if done["type"] == "fail":
                continue
            targets = _targets_of(done["value"]) or _targets_of(ev["value"]) or []
            window = {
                "kind": kind,
                "targets": ",".join(targets),
                "start_index": int(ev["index"]),
                "start_ns": int(done["time"]),
                "end_ns": end_ns,
                "healed": False,
            }
            rows.append(window)
            open_windows.setdefault(kind, []).append(window)
        else:
            for window in open_windows.pop(kind, []):
                window["end_ns"] = int(done["time"])
                window["healed"] = True
    frame = pd.DataFrame(rows, columns=[c for c in FAULT_COLUMNS if c != "duration_ms"])
    frame = frame.astype({"start_index": "int64", "start_ns": "int64", "end_ns": "int64", "healed": bool})
    frame["duration_ms"] = (frame["end_ns"] - frame["start_ns"]) / NS_PER_MS
    return frame


def _active_state(times: np.ndarray, faults: pd.DataFrame) -> np.ndarray:
    """'calm', or the kinds of fault windows [start, end) containing each time, sorted, joined by '+'."""
    state = np.full(len(times), "", dtype=object)
    for kind in sorted(faults["kind"].unique()) if len(faults) else []:
        of_kind = faults[faults["kind"] == kind]
        active = np.zeros(len(times), dtype=bool)
        for start, end in zip(of_kind["start_ns"].to_numpy(), of_kind["end_ns"].to_numpy()):
            active |= (times >= start) & (times < end)
        state = np.where(active, np.where(state == "", kind, state + "+" + kind), state)
    return np.where(state == "", CALM, state)


def pair_ops(events: pd.DataFrame, faults: pd.DataFrame) -> pd.DataFrame:
    """Client ops: each invoke paired with the next event of the same process when that is a
    completion. An invoke with no completion is indeterminate (outcome `info`, no latency). The fault
    state is taken at invocation."""
    client = events[events["process"] != NEMESIS_PROCESS]
    codes, _ = pd.factorize(client["process"])
    client = client.iloc[np.lexsort((client["index"].to_numpy(), codes))]  # by process, then index
    proc = client["process"].to_numpy()
    typ = client["type"].to_numpy()
    nxt = {c: client[c].shift(-1).to_numpy() for c in ("process", "type", "time", "node", "error", "key")}
    is_invoke = typ == INVOKE
    paired = is_invoke & (nxt["process"] == proc) & np.isin(nxt["type"], COMPLETIONS)
    inv = client[is_invoke]
    paired_inv = paired[is_invoke]
    complete = np.where(paired_inv, nxt["time"][is_invoke], np.nan).astype("float64")
    invoke_ns = inv["time"].to_numpy(dtype="int64")
    node = np.where(paired_inv & pd.notna(nxt["node"][is_invoke]), nxt["node"][is_invoke], inv["node"])
    key = np.where(pd.notna(inv["key"].to_numpy()), inv["key"].to_numpy(), nxt["key"][is_invoke])
    ops = pd.DataFrame(
        {
            "invoke_index": inv["index"].to_numpy(dtype="int64"),
            "process": inv["process"].to_numpy(),
            "f": inv["f"].to_numpy(),
            "key": key,
            "node": node,
            "outcome": np.where(paired_inv, nxt["type"][is_invoke], "info"),
            "invoke_ns": invoke_ns,
            "complete_ns": pd.array(np.where(paired_inv, complete, np.nan), dtype="Int64"),
            "latency_ms": (complete - invoke_ns) / NS_PER_MS,
            "error": np.where(paired_inv, nxt["error"][is_invoke], None),
            "fault_state": _active_state(invoke_ns, faults),
        },
        columns=list(OPS_COLUMNS),
    )
    for col in ("key", "node", "error"):
        ops[col] = ops[col].where(pd.notna(ops[col]), None)
    return ops.sort_values("invoke_index", kind="stable").reset_index(drop=True)


def _overlapping(faults: pd.DataFrame, start: int, end: int) -> str:
    hit = faults[(faults["start_ns"] < end) & (faults["end_ns"] > start)]
    kinds = sorted(set(hit["kind"]))
    return "+".join(kinds) if kinds else CALM


def unavailability(
    ops: pd.DataFrame, faults: pd.DataFrame, end_ns: int, gap_ms: float = DEFAULT_GAP_MS
) -> pd.DataFrame:
    """Windows with no successful op of an f for longer than `gap_ms`. The timeline of an f runs from
    its first invocation to the end of the run; its successes (ok completions) cut it into intervals;
    an interval longer than the threshold is a window (open_ended when no success closed it)."""
    rows: list[dict[str, Any]] = []
    for f in sorted(ops["f"].dropna().unique()):
        of_f = ops[ops["f"] == f]
        oks = np.sort(of_f.loc[of_f["outcome"] == "ok", "complete_ns"].dropna().to_numpy(dtype="int64"))
        starts = np.concatenate([[int(of_f["invoke_ns"].min())], oks])
        ends = np.concatenate([oks, [end_ns]])
        for i, (start, end) in enumerate(zip(starts.tolist(), ends.tolist())):
            if (end - start) / NS_PER_MS > gap_ms:
                rows.append(
                    {
                        "f": f,
                        "start_ns": start,
                        "end_ns": end,
                        "duration_ms": (end - start) / NS_PER_MS,
                        "open_ended": i == len(oks),
                        "overlapping_faults": _overlapping(faults, start, end),
                    }
                )
    frame = pd.DataFrame(rows, columns=list(UNAVAILABILITY_COLUMNS))
    return frame.astype({"start_ns": "int64", "end_ns": "int64", "duration_ms": "float64", "open_ended": bool})


def recovery(ops: pd.DataFrame, faults: pd.DataFrame) -> pd.DataFrame:
    """Failover and recovery times: for each fault's start (and heal, when healed) and each f, the
    time until the first successful op of that f invoked at or after the event completes (ops already
    in flight before the event do not count: they may have been served before it)."""
    rows: list[dict[str, Any]] = []
    by_f: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for f in sorted(ops["f"].dropna().unique()):
        ok = ops[(ops["f"] == f) & (ops["outcome"] == "ok")].sort_values("invoke_ns", kind="stable")
        invoked = ok["invoke_ns"].to_numpy(dtype="int64")
        completed = ok["complete_ns"].to_numpy(dtype="float64")
        suffix_min = np.minimum.accumulate(completed[::-1])[::-1] if len(completed) else completed
        by_f[f] = (invoked, suffix_min)
    for fault in faults.sort_values("start_ns", kind="stable").to_dict("records"):
        events = [("start", fault["start_ns"])]
        if fault["healed"]:
            events.append(("heal", fault["end_ns"]))
        for event, at in events:
            for f, (invoked, suffix_min) in by_f.items():
                pos = int(np.searchsorted(invoked, at, side="left"))
                nxt = int(suffix_min[pos]) if pos < len(invoked) else None
                rows.append(
                    {
                        "kind": fault["kind"],
                        "targets": fault["targets"],
                        "event": event,
                        "event_ns": int(at),
                        "f": f,
                        "next_ok_ns": nxt,
                        "delay_ms": math.nan if nxt is None else (nxt - at) / NS_PER_MS,
                    }
                )
    frame = pd.DataFrame(rows, columns=list(RECOVERY_COLUMNS))
    frame["next_ok_ns"] = pd.array(frame["next_ok_ns"], dtype="Int64")
    return frame.astype({"event_ns": "int64", "delay_ms": "float64"})


def spark_availability(ops: DataFrame, faults: DataFrame, run_ends: DataFrame, gap_ms: float) -> DataFrame:
    """The Spark form of `unavailability` and `recovery` together, over many runs, with one shuffle of
    the ok ops: a timeline per run and f of its first invocation, its ok ops, its end and its faults'
    starts and heals, read twice backwards with running minimums.

    - Unavailability (ok ops placed at their completion): the next success or end after each start
      point; a gap longer than `gap_ms` is a window (open_ended when the end closed it).
    - Recovery (ok ops placed at their invocation): the first completion of an ok op invoked at or
      after each event (events sort before ops at the same instant: searchsorted(side="left")).

    Rows have role "window" (f, start_ns, end_ns, duration_ms, open_ended) or "event" (kind, targets,
    start_ns of the fault, event, event_ns, f, next_ok_ns, delay_ms). `run_ends` holds run_id, end_ns.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    nothing = {"_done": "long", "kind": "string", "targets": "string", "start_ns": "long", "event": "string"}

    def row(frame: DataFrame, role: str, order: int, at: Column, placed: Column, **given: Column) -> DataFrame:
        cols = {c: given.get(c, F.lit(None).cast(t)) for c, t in nothing.items()}
        picked = [F.col("run_id"), F.col("f"), F.lit(role).alias("role"), F.lit(order).alias("_order")]
        picked += [at.alias("_t_avail"), placed.alias("_t_rec"), *(v.alias(k) for k, v in cols.items())]
        return frame.select(*picked)

    of_f = ops.where(F.col("f").isNotNull())
    first = of_f.groupBy("run_id", "f").agg(F.min("invoke_ns").alias("t"))
    ends = first.select("run_id", "f").join(run_ends.select("run_id", F.col("end_ns").alias("t")), "run_id")
    oks = of_f.where((F.col("outcome") == "ok") & F.col("complete_ns").isNotNull())
    faulted = faults.select(
        "run_id", "kind", "targets", "start_ns", F.lit("start").alias("event"), F.col("start_ns").alias("t")
    )
    healed = faults.where("healed").select(
        "run_id", "kind", "targets", "start_ns", F.lit("heal").alias("event"), F.col("end_ns").alias("t")
    )
    events = faulted.unionByName(healed).join(first.select("run_id", "f"), "run_id")
    fault_cols = {c: F.col(c) for c in ("kind", "targets", "start_ns", "event")}
    timeline = (
        row(first, "first", 0, F.col("t"), F.col("t"))
        .unionByName(row(oks, "ok", 1, F.col("complete_ns"), F.col("invoke_ns"), _done=F.col("complete_ns")))
        .unionByName(row(ends, "end", 2, F.col("t"), F.col("t")))
        .unionByName(row(events, "event", 0, F.col("t"), F.col("t"), **fault_cols))
    )
    later = Window.partitionBy("run_id", "f")
    by_completion = later.orderBy(F.desc("_t_avail"), F.desc("_order")).rowsBetween(Window.unboundedPreceding, -1)
    by_invocation = later.orderBy(F.desc("_t_rec"), F.desc("_order")).rowsBetween(Window.unboundedPreceding, -1)
    point = F.when(F.col("role").isin("ok", "end"), F.struct(F.col("_t_avail").alias("t"), F.col("_order").alias("o")))
    success = F.when(F.col("role") == "ok", F.col("_done"))
    read = timeline.select(
        "*", F.min(point).over(by_completion).alias("_next"), F.min(success).over(by_invocation).alias("next_ok_ns")
    )
    gap = (F.col("_next.t") - F.col("_t_avail")).cast("double") / F.lit(float(NS_PER_MS))
    is_window = F.col("role").isin("first", "ok") & F.col("_next").isNotNull() & (gap > F.lit(float(gap_ms)))
    delay = (F.col("next_ok_ns") - F.col("_t_rec")).cast("double") / F.lit(float(NS_PER_MS))
    return read.where(is_window | (F.col("role") == "event")).select(
        "run_id",
        "f",
        F.when(F.col("role") == "event", "event").otherwise("window").alias("role"),
        F.when(is_window, F.col("_t_avail")).alias("window_start_ns"),
        F.when(is_window, F.col("_next.t")).alias("window_end_ns"),
        F.when(is_window, gap).alias("duration_ms"),
        F.when(is_window, F.col("_next.o") == 2).alias("open_ended"),
        "kind",
        "targets",
        "start_ns",
        "event",
        F.when(F.col("role") == "event", F.col("_t_rec")).alias("event_ns"),
        F.when(F.col("role") == "event", F.col("next_ok_ns")).alias("next_ok_ns"),
        F.when(F.col("role") == "event", delay).alias("delay_ms"),
    )


def spark_unavailability(availability: DataFrame, faults: DataFrame) -> DataFrame:
    """The windows of `spark_availability`, with the kinds of the faults overlapping each (or calm)."""
    from pyspark.sql import functions as F

    windows = availability.where(F.col("role") == "window").select(
        "run_id",
        "f",
        F.col("window_start_ns").alias("start_ns"),
        F.col("window_end_ns").alias("end_ns"),
        "duration_ms",
        "open_ended",
    )
    w, x = windows.alias("w"), faults.alias("x")
    hit = (F.col("w.run_id") == F.col("x.run_id")) & (F.col("x.start_ns") < F.col("w.end_ns"))
    hit = hit & (F.col("x.end_ns") > F.col("w.start_ns"))
    kinds = F.array_join(F.array_sort(F.collect_set(F.col("x.kind"))), "+")
    keys = [F.col(f"w.{c}").alias(c) for c in ("run_id", "f", "start_ns", "end_ns", "duration_ms", "open_ended")]
    out = w.join(x, hit, "left").groupBy(*keys).agg(kinds.alias("_kinds"))
    overlapping = F.when(F.col("_kinds") == "", F.lit(CALM)).otherwise(F.col("_kinds"))
    return out.select("run_id", *UNAVAILABILITY_COLUMNS[:-1], overlapping.alias("overlapping_faults")).orderBy(
        "run_id", "f", "start_ns"
    )


def spark_recovery(availability: DataFrame) -> DataFrame:
    """The failover (event start) and recovery (event heal) rows of `spark_availability`, in the order
    of the per-run form: by run, fault start, start before heal, f."""
    from pyspark.sql import functions as F

    events = availability.where(F.col("role") == "event")
    order = F.when(F.col("event") == "start", 0).otherwise(1)
    return events.orderBy("run_id", "start_ns", "kind", order, "f").select("run_id", *RECOVERY_COLUMNS)


@dataclass
class RunFrames:
    """Everything derived from one run's history."""

    end_ns: int
    events: int
    faults: pd.DataFrame
    ops: pd.DataFrame


def derive(events: pd.DataFrame) -> RunFrames:
    end = run_end_ns(events)
    faults = fault_windows(events, end)
    return RunFrames(end_ns=end, events=len(events), faults=faults, ops=pair_ops(events, faults))


# ---------------------------------------------------------------------------------------------------
# Aggregates: pandas form (one run, or a test's oracle) and Spark form (many runs)


def explode_fault_state(ops: pd.DataFrame) -> pd.DataFrame:
    """An op counts under 'calm', or under each fault kind active at its invocation."""
    out = ops.assign(fault=ops["fault_state"].str.split("+"))
    return out.explode("fault")


def latency_quantiles(ops: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """count, p50, p90, p99, p99.9 and max of latency_ms per group (groups over the exploded fault
    state when `by` names 'fault')."""
    data = explode_fault_state(ops) if "fault" in by else ops
    data = data[data["latency_ms"].notna()]
    grouped = data.groupby(by, sort=True)["latency_ms"]
    out = grouped.agg(["count", "max"]).rename(columns={"max": "max_ms"})
    for q, name in zip(QUANTILES, QUANTILE_NAMES):
        out[f"{name}_ms"] = grouped.quantile(q, interpolation="linear")
    cols = ["count", *(f"{n}_ms" for n in QUANTILE_NAMES), "max_ms"]
    return out[cols].reset_index()


def spark_latency_quantiles(ops: DataFrame, by: list[str]) -> DataFrame:
    """The Spark form of `latency_quantiles`, exact: each group's latencies are gathered and sorted
    (array_sort(collect_list)) and read at position q * (n - 1) with linear interpolation, the same
    definition as pandas' quantile and Spark SQL's `percentile` (measured 4-5x faster than the latter)."""
    from pyspark.sql import functions as F

    data = ops.where(F.col("latency_ms").isNotNull())
    if "fault" in by:
        data = data.withColumn("fault", F.explode(F.split("fault_state", r"\+")))
    grouped = data.groupBy(*by).agg(F.array_sort(F.collect_list("latency_ms")).alias("_sorted"))
    n = F.size("_sorted")
    cols = []
    for q, name in zip(QUANTILES, QUANTILE_NAMES):
        pos = F.lit(q) * (n - 1)
        lo = F.floor(pos).cast("int")
        below = F.element_at("_sorted", lo + 1)
        above = F.element_at("_sorted", F.least(lo + 2, n))
        cols.append((below + (above - below) * (pos - lo)).alias(f"{name}_ms"))
    out = grouped.select(*by, n.cast("long").alias("count"), *cols, F.element_at("_sorted", -1).alias("max_ms"))
    return out.orderBy(*by)


def throughput(ops: pd.DataFrame) -> pd.DataFrame:
    """Completed ops per second of run time, by f and outcome (ops without a completion excluded)."""
    done = ops[ops["complete_ns"].notna()]
    second = done["complete_ns"].astype("int64") // (THROUGHPUT_BUCKET_S * NS_PER_S) * THROUGHPUT_BUCKET_S
    counted = done.assign(second=second).groupby(["second", "f", "outcome"]).size()
    return counted.rename("ops").reset_index()


def spark_second(col: str = "complete_ns") -> Column:
    from pyspark.sql import functions as F

    bucket = THROUGHPUT_BUCKET_S * NS_PER_S
    return (F.floor(F.col(col) / F.lit(bucket)) * F.lit(THROUGHPUT_BUCKET_S)).cast("long")


def info_rate(ops: pd.DataFrame) -> float:
    """Share of invoked client ops whose outcome is indeterminate."""
    return float((ops["outcome"] == "info").mean()) if len(ops) else 0.0


# ---------------------------------------------------------------------------------------------------
# Verdicts, commit loss and anomalies (from results.json)


@dataclass
class CheckerFigures:
    checker: str
    valid: str
    lost_count: int
    anomaly_count: int
    anomaly_types: list[str]


def _lost_of(details: dict[str, Any]) -> int:
    count = details.get("lost-count")
    if isinstance(count, int) and not isinstance(count, bool):
        return count
    lost = details.get("lost")
    return len(lost) if isinstance(lost, list) else 0


def checker_figures(results: dict[str, Any]) -> list[CheckerFigures]:
    """Per checker: verdict, lost acknowledged writes (`lost-count`, else the length of `lost`) and
    anomalies (lost writes + entries of `anomalies`, else one per `anomaly-types` entry; an invalid
    verdict with nothing itemised counts as one anomaly)."""
    checkers = results.get("checkers")
    out: list[CheckerFigures] = []
    if not isinstance(checkers, dict):
        return out
    for name in sorted(checkers):
        details = checkers[name] if isinstance(checkers[name], dict) else {}
        valid = verdict_text(details.get("valid", "unknown"))
        lost = _lost_of(details)
        anomalies = details.get("anomalies")
        types: list[str] = []
        if isinstance(anomalies, dict):
            itemised = sum(len(v) if isinstance(v, list) else 1 for v in anomalies.values())
            types = sorted(str(k) for k in anomalies)
        else:
            listed = details.get("anomaly-types")
            types = sorted(str(t) for t in listed) if isinstance(listed, list) else []
            itemised = len(types)
        if lost:
            types = sorted({*types, "lost"})
        count = lost + itemised
        if valid == "false" and count == 0:
            count = 1
        out.append(CheckerFigures(name, valid, lost, count, types))
    return out


def run_lost(figures: Iterable[CheckerFigures]) -> int:
    """Acknowledged writes a run lost: the sum of its checkers' lost counts."""
    return sum(c.lost_count for c in figures)


# ---------------------------------------------------------------------------------------------------
# Across runs, over tables with a row per run (or per fault / window): small, so pandas in the driver


def pass_rates(runs: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """Pass rate = runs whose verdict is true / all runs (an unknown verdict is not a pass)."""
    grouped = runs.groupby(by, sort=True)["valid"]
    out = pd.DataFrame(
        {
            "runs": grouped.size(),
            "passed": grouped.agg(lambda v: int((v == "true").sum())),
            "failed": grouped.agg(lambda v: int((v == "false").sum())),
            "unknown": grouped.agg(lambda v: int((v == "unknown").sum())),
        }
    ).reset_index()
    out["pass_rate"] = out["passed"] / out["runs"]
    return out


def flaky_tests(runs: pd.DataFrame) -> pd.DataFrame:
    """A test is flaky when the same test has both passing and failing runs."""
    rates = pass_rates(runs, ["test"])
    return rates[(rates["passed"] > 0) & (rates["failed"] > 0)].reset_index(drop=True)


def commit_loss(runs: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """Lost acknowledged writes per group, how many runs lost any, and which."""
    rows = []
    for group, part in runs.groupby(by, sort=True):
        keys = group if isinstance(group, tuple) else (group,)
        lost = part[part["lost_count"] > 0]
        rows.append(
            {
                **dict(zip(by, keys)),
                "runs": len(part),
                "runs_with_loss": len(lost),
                "lost_writes": int(part["lost_count"].sum()),
                "runs_that_lost": " ".join(sorted(lost["run_id"])),
            }
        )
    return pd.DataFrame(rows, columns=[*by, "runs", "runs_with_loss", "lost_writes", "runs_that_lost"])


def anomalies_by_checker(checkers: pd.DataFrame) -> pd.DataFrame:
    grouped = checkers.groupby("checker", sort=True)
    return pd.DataFrame(
        {
            "runs": grouped.size(),
            "invalid": grouped["valid"].agg(lambda v: int((v == "false").sum())),
            "unknown": grouped["valid"].agg(lambda v: int((v == "unknown").sum())),
            "anomalies": grouped["anomaly_count"].sum(),
            "lost_writes": grouped["lost_count"].sum(),
        }
    ).reset_index()


def anomalies_by_workload(checkers: pd.DataFrame) -> pd.DataFrame:
    """Per workload and checker: runs, invalid and unknown verdicts, anomalies, lost writes and the
    anomaly types seen (a checker's rows are the runs of workloads it judged)."""
    columns = ["workload", "checker", "runs", "invalid", "unknown", "anomalies", "lost_writes", "anomaly_types"]
    if checkers.empty:
        return pd.DataFrame(columns=columns)
    grouped = checkers.groupby(["workload", "checker"], sort=True)
    out = pd.DataFrame(
        {
            "runs": grouped.size(),
            "invalid": grouped["valid"].agg(lambda v: int((v == "false").sum())),
            "unknown": grouped["valid"].agg(lambda v: int((v == "unknown").sum())),
            "anomalies": grouped["anomaly_count"].sum(),
            "lost_writes": grouped["lost_count"].sum(),
            "anomaly_types": grouped["anomaly_types"].agg(
                lambda v: ",".join(sorted({t for types in v for t in types.split(",") if t}))
            ),
        }
    ).reset_index()
    return out[columns]


def anomaly_types(checkers: pd.DataFrame) -> pd.DataFrame:
    """Runs in which each checker reported each anomaly type."""
    typed = checkers[checkers["anomaly_types"] != ""]
    exploded = typed.assign(anomaly_type=typed["anomaly_types"].str.split(",")).explode("anomaly_type")
    return exploded.groupby(["checker", "anomaly_type"], sort=True).size().rename("runs").reset_index()


def _delay_stats(frame: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    grouped = frame.groupby(by, sort=True)["delay_ms"]
    out = pd.DataFrame(
        {
            "events": grouped.size(),
            "recovered": grouped.count(),
            "p50_ms": grouped.quantile(0.5, interpolation="linear"),
            "p99_ms": grouped.quantile(0.99, interpolation="linear"),
            "max_ms": grouped.max(),
        }
    )
    return out.reset_index()


def recovery_summary(recovered: pd.DataFrame) -> pd.DataFrame:
    """Failover (event=start) and recovery (event=heal) times by fault kind and f."""
    return _delay_stats(recovered, ["kind", "event", "f"])


def failover_trend(recovered: pd.DataFrame) -> pd.DataFrame:
    """Failover times per test and night (recovered needs test and date columns)."""
    return _delay_stats(recovered[recovered["event"] == "start"], ["test", "date", "kind"])


def unavailability_summary(windows: pd.DataFrame) -> pd.DataFrame:
    grouped = windows.groupby(["test", "f"], sort=True)
    out = pd.DataFrame(
        {
            "windows": grouped.size(),
            "total_s": grouped["duration_ms"].sum() / 1000,
            "max_ms": grouped["duration_ms"].max(),
            "open_ended": grouped["open_ended"].sum().astype("int64"),
        }
    )
    return out.reset_index()


def info_rates(counts: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """Share of indeterminate ops; `counts` holds ops and info per run and f."""
    grouped = counts.groupby(by, sort=True)[["ops", "info"]].sum().reset_index()
    grouped["info_rate"] = grouped["info"] / grouped["ops"]
    return grouped
