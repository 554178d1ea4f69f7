"""The glue to the compiled search (`checkers/_lincore.c`): the same walk as `search`, the same
configurations, the same longest partial linearization, for the models that give a `NativeSpec`.
Without the build, the pure-Python search runs and one line on stderr says so.
"""

from __future__ import annotations

import sys

from checkers.linearizable.prepared import Prepared
from checkers.linearizable.search import Limits, Outcome
from checkers.models import Model, NativeSpec
from checkers.verdict import UNKNOWN

try:  # the compiled search (setup.py builds it); without it, the pure-Python one, with a notice
    from checkers import _lincore
except ImportError:  # pragma: no cover - depends on the build
    _lincore = None

NATIVE_MISSING = (
    "note: the compiled linearizability search (checkers/_lincore) is not built, so the pure-Python "
    "search runs (slower); build it with `pip install -e .` (setup.sh; needs gcc and python3-dev)"
)
NATIVE_OPS_PER_JOB = 300_000  # the compiled search does ~1M ops a second: forking pays off beyond this

_RESULTS = {1: (True, None), 0: (False, None), 2: (UNKNOWN, "timeout"), 3: (UNKNOWN, "state budget")}

# Whether the notice was printed: once per process, whatever the number of checks (not job state).
_NOTICED: list[bool] = []


def available() -> bool:
    """Whether the compiled search is built (`kchaos doctor` reports it)."""
    return _lincore is not None


def model_has_native(model: Model) -> bool:
    """The model has a compiled form, and the compiled search is built."""
    return _lincore is not None and type(model).native is not Model.native


def notice_if_pure_python(model: Model) -> None:
    """One line on stderr, once per process, when the model could use the compiled search but it
    is not built."""
    if _lincore is None and type(model).native is not Model.native and not _NOTICED:
        _NOTICED.append(True)
        print(NATIVE_MISSING, file=sys.stderr)


def native_search(p: Prepared, spec: NativeSpec, prune: bool, guard: bool, limits: Limits) -> Outcome:
    """`search.search` in C. `prune`: the model's pruner (the observer shortcut stays on either way,
    as in the Python search); `guard`: the unique-value guard."""
    if _lincore is None:
        raise RuntimeError("the compiled linearizability search is not built")
    code, states, order = _lincore.search(
        p.inv, p.ret, spec.kind, spec.a, spec.b, spec.pure, p.iinv, spec.ikind, spec.ia, spec.ib, spec.blind,
        spec.values, prune, guard, limits.deadline, limits.max_states, *_symmetry_flag(prune and spec.symmetric),
    )  # fmt: skip
    valid, reason = _RESULTS[code]
    n = len(p.inv)
    if valid is True:  # a found linearization is never shown: only a failed search's partial one is
        return Outcome(valid, reason, states, None, (n, 0, 0, None))
    path = None
    done, info = set(), 0
    for c in order:
        path = (c, path)
        if c < n:
            done.add(c)
        else:
            info |= 1 << (c - n)
    lo = 0
    while lo in done:
        lo += 1
    dmask = sum(1 << (c - lo) for c in done if c > lo)
    return Outcome(valid, reason, states, path, (lo, dmask, info, None))


def _symmetry_flag(on: bool) -> tuple[bool, ...]:
    """The compiled search's symmetry argument; a build older than it (no `SYMMETRY`) gets none."""
    return (on,) if on and hasattr(_lincore, "SYMMETRY") else ()
