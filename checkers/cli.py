"""`kchaos check`: run checkers over a history file and print the verdict."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from checkers import linearizable
from checkers.history import HistoryError
from checkers.history_files import load_any
from checkers.progress import ProgressLine, Tracker
from checkers.registry import CHECKERS, checker_module, get_checker
from checkers.verdict import Verdict, compose, exit_code
from vocab.errors import UserError


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "check",
        description="Check a history.jsonl. Exit 0 valid, 1 invalid, 2 unknown, 254 error.",
    )
    parser.add_argument("history", type=Path, help="history.jsonl")
    parser.add_argument(
        "--checker",
        action="append",
        choices=sorted(CHECKERS),
        help="checker to run (repeatable; several are composed). Default: linearizable",
    )
    parser.add_argument("--html", type=Path, help="write a counterexample viewer (linearizable) here")
    parser.add_argument("--json", action="store_true", help="print the verdict as JSON")
    seen = set()
    for name in sorted(CHECKERS):
        module = checker_module(name)
        add = _FLAGS_HERE.get(module.__name__) or getattr(module, "add_check_arguments", None)
        if add is not None and module.__name__ not in seen:
            seen.add(module.__name__)
            add(parser)
    parser.set_defaults(func=run)


def add_linearizable_arguments(parser: argparse.ArgumentParser) -> None:
    """The linearizable checker's flags (read by `checkers.linearizable.check_from_args`)."""
    group = parser.add_argument_group("linearizable")
    timeout, max_states = linearizable.DEFAULT_TIMEOUT_S, linearizable.DEFAULT_MAX_STATES
    group.add_argument("--model", default="register", help="sequential model: register, kv, ...")
    group.add_argument(
        "--timeout",
        type=float,
        default=timeout,
        help=f"seconds before undecided keys are unknown (default {timeout:g}; 0: no limit)",
    )
    group.add_argument(
        "--max-states",
        type=int,
        default=max_states,
        help=f"memoised configurations per key before it is unknown (default {max_states:,})",
    )
    group.add_argument("--jobs", type=int, default=None, help="keys checked in parallel (default: all cores)")
    group.add_argument(
        "--all-keys", action="store_true", help="decide every key instead of stopping at the first bad one"
    )
    group.add_argument("--ignore-f", action="append", help="leave out ops with this f (repeatable), e.g. read-broker")


# Checker modules whose `kchaos check` flags live here rather than in the module (in the group order
# of the loop above: sorted by checker name).
_FLAGS_HERE = {"checkers.linearizable": add_linearizable_arguments}


def run(args: argparse.Namespace) -> int:
    names = list(dict.fromkeys(args.checker or ["linearizable"]))
    try:
        history = load_any(args.history)
    except HistoryError as exc:
        raise UserError(str(exc)) from None
    verdicts = []
    args.tracker = Tracker()
    with ProgressLine(args.tracker):  # silent unless the checks take more than a second
        for name in names:
            try:
                verdicts.append(get_checker(name)(history, args))
            except (ValueError, HistoryError) as exc:  # bad model name, an op the model cannot read...
                raise UserError(f"{args.history}: {name}: {exc}") from None
    verdict = verdicts[0] if len(verdicts) == 1 else compose(verdicts)
    if args.html:
        _write_html(args, history, verdicts)
    if args.json:
        json.dump(verdict.to_json(), sys.stdout, indent=2, default=str)
        print()
    else:
        for v in verdicts:
            for line in _summary(v):
                print(line)
        if len(verdicts) > 1:
            print(f"overall: {verdict.valid}")
    return exit_code(verdict.valid)


def _summary(verdict: Verdict) -> list[str]:
    if verdict.checker in CHECKERS:
        summarize = getattr(checker_module(verdict.checker), "summarize", None)
        if summarize is not None:
            return summarize(verdict)
    return [f"{verdict.checker}: {verdict.valid}"]


def _write_html(args: argparse.Namespace, history, verdicts: list[Verdict]) -> None:
    from checkers.viewer import write_html

    lin = [v for v in verdicts if v.checker == "linearizable"]
    if not lin:
        raise UserError("--html needs --checker linearizable")
    try:
        path = write_html(args.html, history, lin[0], model=getattr(args, "model", "register"))
    except OSError as exc:
        raise UserError(f"{args.html}: cannot write: {exc.strerror or exc}") from None
    print(f"viewer: {path}", file=sys.stderr)
