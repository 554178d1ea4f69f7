"""A history file of either format a user hands `kchaos check`: our history.jsonl or Jepsen's
history.edn, told apart by content (`checkers.edn.is_edn`). Kept above both readers so that neither
imports the other."""

from __future__ import annotations

from pathlib import Path

from checkers.edn import is_edn, load_edn
from checkers.history import History, load_history


def load_any(path: str | Path) -> History:
    """The paired history in `path`, whichever format it is in."""
    return load_edn(path) if is_edn(path) else load_history(path)
