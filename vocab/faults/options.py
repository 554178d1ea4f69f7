"""A run's nemesis options per kind: weight, modes, targets and parameters, defaults filled in.

The test model validates `[nemesis_options.<kind>]` against the catalogue (one-line errors); this
module merges what it holds with `nemesis_modes` and the catalogue's defaults into `KindOptions`,
which the schedule (weights, modes) and the nemesis (targets, parameters) read. A parameter given
as a list, or a default that is a tuple, is drawn from at each start.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from vocab.faults.catalogue import spec


@dataclass(frozen=True)
class KindOptions:
    kind: str
    weight: float
    modes: tuple[str, ...]
    targets: tuple[str, ...] = ()
    params: dict[str, Any] = field(default_factory=dict)  # name -> value, or a tuple to draw from

    def draw(self, name: str, rng: random.Random) -> Any:
        """The parameter's value for one start."""
        value = self.params[name]
        return rng.choice(value) if isinstance(value, tuple) else value

    def draw_params(self, mode: str, rng: random.Random) -> dict[str, Any]:
        """Every parameter that applies to `mode`, drawn in catalogue order."""
        out = {}
        for param in spec(self.kind).params:
            if not param.modes or mode in param.modes:
                out[param.name] = self.draw(param.name, rng)
        return out


def kind_options(
    kind: str,
    modes: Sequence[str] | None = None,
    options: Mapping[str, Any] | None = None,
) -> KindOptions:
    """The options of one kind: `options` (a validated `[nemesis_options.<kind>]` table) over
    `modes` (from `nemesis_modes`) over the catalogue's defaults."""
    kind_spec = spec(kind)
    given = dict(options or {})
    chosen_modes = tuple(given.pop("modes", None) or modes or kind_spec.default_modes)
    targets = tuple(given.pop("targets", None) or kind_spec.default_targets)
    weight = float(given.pop("weight", 1.0))
    params: dict[str, Any] = {}
    for param in kind_spec.params:
        value = given.pop(param.name, param.default)
        if isinstance(value, list | tuple):
            value = tuple(param.type(v) if param.type is not str else v for v in value)
            value = value[0] if len(value) == 1 else value
        elif param.type is not str:
            value = param.type(value)
        params[param.name] = value
    if given:
        raise ValueError(f"unknown {kind} option(s): {', '.join(sorted(given))}")
    return KindOptions(kind, weight, chosen_modes, targets, params)


def all_options(
    kinds: Sequence[str],
    nemesis_modes: Mapping[str, Sequence[str]] | None = None,
    nemesis_options: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, KindOptions]:
    modes = nemesis_modes or {}
    options = nemesis_options or {}
    return {kind: kind_options(kind, modes.get(kind), options.get(kind)) for kind in kinds}
