"""Elle-style transactional checking: dependency graphs, cycles and the anomalies they name."""

from checkers.elle.anomalies import DEFAULT_MODEL, MODELS
from checkers.elle.list_append import check_list_append
from checkers.elle.rw_register import check_rw_register

__all__ = ["DEFAULT_MODEL", "MODELS", "check_list_append", "check_rw_register"]
