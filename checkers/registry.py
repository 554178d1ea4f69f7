"""Checkers available to `kchaos check --checker NAME`.

Each entry maps a name to "module:function", where the function takes the loaded `History` and the
parsed CLI arguments and returns a `Verdict`. Add one line per checker. A checker module may also
define `add_check_arguments(parser)` for its own flags and `summarize(verdict) -> list[str]` for its
console summary.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from types import ModuleType
from typing import Any

from checkers.history import History
from checkers.verdict import Verdict

CheckFn = Callable[[History, Any], Verdict]

CHECKERS: dict[str, str] = {
    "linearizable": "checkers.linearizable:check_from_args",
    "elle-list-append": "checkers.elle.commands:list_append_from_args",
    "elle-rw-register": "checkers.elle.commands:rw_register_from_args",
    "set-full": "checkers.set_full:check_from_args",
    "log-agreement": "checkers.log_agreement:check_from_args",
    "committed-loss": "checkers.committed_loss:check_from_args",
    "availability": "checkers.availability:check_from_args",
    "image-reads": "checkers.image_reads:check_from_args",
    "registrations": "checkers.registrations:check_from_args",
    "partition-state": "checkers.partition_state:check_from_args",
    "partition-cas": "checkers.partition_cas:check_from_args",
    "metadata-answers": "checkers.metadata_answers:check_from_args",
    "forgery": "checkers.forgery:check_from_args",
    "quorum-progress": "checkers.quorum_progress:check_from_args",
    "watch-order": "checkers.watch_order:check_from_args",
    "elections": "checkers.elections:check_from_args",
    "prefix-reads": "checkers.prefix_reads:check_from_args",
    "stale-list-reads": "checkers.stale_list_reads:check_from_args",
}


def checker_module(name: str) -> ModuleType:
    return importlib.import_module(CHECKERS[name].partition(":")[0])


def get_checker(name: str) -> CheckFn:
    """The check function registered as `name` (KeyError if there is none)."""
    module, _, func = CHECKERS[name].partition(":")
    return getattr(importlib.import_module(module), func)
