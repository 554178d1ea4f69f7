"""`kchaos check --checker elle-list-append | elle-rw-register`: flags, entry points and summaries."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from checkers.elle.anomalies import DEFAULT_MODEL, MODELS
from checkers.elle.core import SEARCH_BUDGET
from checkers.elle.list_append import check_list_append
from checkers.elle.render import write_html
from checkers.elle.rw_register import check_rw_register
from checkers.history import History
from checkers.verdict import Verdict


def add_check_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("elle-list-append / elle-rw-register")
    group.add_argument(
        "--consistency-model",
        default=DEFAULT_MODEL,
        metavar="MODEL",
        help=f"the model whose anomalies make the history invalid (default {DEFAULT_MODEL}); any model of "
        f"Elle's lattice: {', '.join(MODELS)}",
    )
    group.add_argument(
        "--wfr-keys",
        action="store_true",
        help="rw-register: assume a transaction's write of a key follows its own read of it",
    )
    group.add_argument(
        "--sequential-keys",
        action="store_true",
        help="rw-register: assume every key is sequentially consistent (orders versions in process order)",
    )
    group.add_argument(
        "--linearizable-keys",
        action="store_true",
        help="rw-register: assume every key is linearizable (orders versions in real time)",
    )
    group.add_argument(
        "--cycle-search-budget",
        type=int,
        default=SEARCH_BUDGET,
        metavar="STATES",
        help=f"search states per cycle class and component before giving up (default {SEARCH_BUDGET:,})",
    )
    group.add_argument("--cycles-html", type=Path, help="write the cycles' drawings to this HTML file")


def _finish(verdict: Verdict, args: Any) -> Verdict:
    target = getattr(args, "cycles_html", None)
    if target is not None:
        try:
            write_html(target, verdict)
        except OSError as exc:
            raise ValueError(f"{target}: cannot write: {exc.strerror or exc}") from None
        print(f"cycles: {target}", file=sys.stderr)
    return verdict


def list_append_from_args(history: History, args: Any) -> Verdict:
    model = getattr(args, "consistency_model", DEFAULT_MODEL)
    budget = getattr(args, "cycle_search_budget", SEARCH_BUDGET)
    return _finish(check_list_append(history, model, cycle_search_budget=budget), args)


def rw_register_from_args(history: History, args: Any) -> Verdict:
    verdict = check_rw_register(
        history,
        getattr(args, "consistency_model", DEFAULT_MODEL),
        sequential_keys=getattr(args, "sequential_keys", False),
        linearizable_keys=getattr(args, "linearizable_keys", False),
        wfr_keys=getattr(args, "wfr_keys", False),
        cycle_search_budget=getattr(args, "cycle_search_budget", SEARCH_BUDGET),
    )
    return _finish(verdict, args)


def summarize(verdict: Verdict) -> list[str]:
    d = verdict.details
    lines = [
        f"{verdict.checker}: {verdict.valid} (model {d['consistency_model']}, {d['txn_count']} transactions "
        f"{d['txns_by_type']})"
    ]
    violations = set(d["violations"])
    for name, count in d["anomaly_counts"].items():
        mark = "  <- violates the model" if name in violations else ""
        lines.append(f"  {name}: {count}{mark}  ({d['meanings'].get(name, '')})")
    if d["not"]:
        lines.append(
            f"  not {', '.join(d['not'])}" + (f"; also not {', '.join(d['also_not'])}" if d["also_not"] else "")
        )
    for timeout in d["anomalies"].get("cycle-search-timeout", [])[:1]:
        absent = ", ".join(timeout["does_not_contain"]) or "-"
        lines.append(
            f"  cycle search gave up on {', '.join(timeout['gave_up_on'])} in a component of "
            f"{timeout['component_size']} transactions; it does not contain {absent}"
        )
    for name in d["violations"]:
        example = d["anomalies"][name][0]
        if "explanation" in example:
            lines += ["", f"  first {name}:", *("    " + line for line in example["explanation"].splitlines())]
            break
    return lines
