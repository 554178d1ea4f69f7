"""The simulated network: which messages arrive, and when.

This module only decides; the world schedules. A message from `src` to `dst` is lost when `dst`
cannot hear `src` (the grudge: node -> nodes it cannot hear, as a nemesis partition would install
with DROP rules) or by a per-link random drop; otherwise it arrives after a random delay drawn
independently per message, which reorders messages on the same link. All randomness comes from the
simulation's one `random.Random`.

Faults come on top of the links' own models and are undone without touching them:
- the grudge (`partition`/`heal`) plus named grudge *layers* (`set_layer`/`clear_layer`) that other
  fault sources (the simulator's targeted faults) add and remove without replacing the nemesis's one;
- one packet fault (`set_packet_fault`/`clear_packet_fault`): on the affected links, each message is
  dropped with probability `loss`, else delayed by `delay_ms` ± `jitter_ms` more than its link says;
- one redeliver fault (`set_redelivery`/`clear_redelivery`): on the affected links, each message
  that is not lost is, with its probability, delivered once more (`copies`): soon after the
  original (`duplicate`) or seconds after it was sent (`stale`). Its random numbers are drawn only
  while it is on, so a run without it keeps its random stream.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from vocab.faults.kinds import PacketFault, RedeliverFault


@dataclass(frozen=True, slots=True)
class DegradedLinks:
    """A `packet` or `redeliver` fault on the links it affects: `pairs` are the (src, dst) directions, None for
    every link between two nodes (not the links to clients outside the cluster)."""

    pairs: frozenset[tuple[int, int]] | None
    fault: PacketFault | RedeliverFault

    def affects(self, src: int, dst: int) -> bool:
        if self.pairs is None:
            return src > 0 and dst > 0
        return (src, dst) in self.pairs


@dataclass(frozen=True, slots=True)
class LinkModel:
    """Drop probability and delay distribution of one direction of one link."""

    drop: float = 0.0
    delay_min_ms: int = 1
    delay_max_ms: int = 5
    exponential: bool = False  # exponential delays with mean (min+max)/2, floored at min

    def __post_init__(self) -> None:
        if not 0.0 <= self.drop <= 1.0:
            raise ValueError(f"drop probability {self.drop} is not within [0, 1]")
        if self.delay_min_ms < 0 or self.delay_max_ms < self.delay_min_ms:
            raise ValueError(f"delay range {self.delay_min_ms}:{self.delay_max_ms} is not 0 <= min <= max")

    def sample_delay(self, rng: random.Random) -> int:
        if self.exponential:
            mean = (self.delay_min_ms + self.delay_max_ms) / 2
            extra = rng.expovariate(1.0 / max(mean - self.delay_min_ms, 0.001))
            return self.delay_min_ms + int(extra)
        return rng.randint(self.delay_min_ms, self.delay_max_ms)


class Network:
    def __init__(self, rng: random.Random, default: LinkModel | None = None) -> None:
        self._rng = rng
        self.default = default or LinkModel()
        self._links: dict[tuple[int, int], LinkModel] = {}
        self._grudge: dict[int, frozenset[int]] = {}
        self._layers: dict[str, dict[int, frozenset[int]]] = {}
        self.packet_fault: DegradedLinks | None = None
        self.sent = 0
        self.dropped = 0
        self.fault_affected = 0  # messages sent on links the packet fault affects
        self.fault_dropped = 0  # of those, lost to the packet fault (also counted in `dropped`)
        self.redelivery: DegradedLinks | None = None
        self.redelivered = 0  # copies the redeliver fault sent

    # --- configuration ---
    def set_link(self, src: int, dst: int, model: LinkModel) -> None:
        self._links[(src, dst)] = model

    def link(self, src: int, dst: int) -> LinkModel:
        return self._links.get((src, dst), self.default)

    def partition(self, grudge: Mapping[int, Iterable[int]]) -> None:
        """Replace the grudge: `grudge[n]` is the set of nodes `n` cannot hear."""
        self._grudge = {n: frozenset(cut) for n, cut in sorted(grudge.items()) if cut}

    def add_grudge(self, grudge: Mapping[int, Iterable[int]]) -> None:
        """Cut more links on top of the current grudge."""
        merged = {n: set(cut) for n, cut in self._grudge.items()}
        for n, cut in grudge.items():
            merged.setdefault(n, set()).update(cut)
        self.partition(merged)

    def heal(self) -> None:
        self._grudge = {}

    def set_layer(self, name: str, grudge: Mapping[int, Iterable[int]]) -> None:
        """Cut links under `name`, beside the grudge; `clear_layer(name)` restores exactly these."""
        self._layers[name] = {n: frozenset(cut) for n, cut in sorted(grudge.items()) if cut}

    def clear_layer(self, name: str) -> bool:
        """Remove the layer `name`; False when there was none."""
        return self._layers.pop(name, None) is not None

    @property
    def layer_names(self) -> list[str]:
        return sorted(self._layers)

    def layer(self, name: str) -> dict[int, tuple[int, ...]] | None:
        cut = self._layers.get(name)
        return None if cut is None else {n: tuple(sorted(c)) for n, c in sorted(cut.items())}

    def set_packet_fault(self, fault: DegradedLinks) -> None:
        """Replace the packet fault (see the module docstring)."""
        self.packet_fault = fault

    def clear_packet_fault(self) -> bool:
        """Remove the packet fault; False when there was none."""
        had, self.packet_fault = self.packet_fault is not None, None
        return had

    def set_redelivery(self, redelivery: DegradedLinks) -> None:
        """Replace the redeliver fault (see the module docstring)."""
        self.redelivery = redelivery

    def clear_redelivery(self) -> bool:
        """Remove the redeliver fault (copies already scheduled still arrive); False when there was none."""
        had, self.redelivery = self.redelivery is not None, None
        return had

    def stop_loss(self) -> None:
        """Set every link's drop probability to 0 (delays stay): packet loss is a fault too."""
        self.default = replace(self.default, drop=0.0)
        self._links = {key: replace(model, drop=0.0) for key, model in self._links.items()}

    @property
    def lossy(self) -> bool:
        """Some link drops messages by itself (the `--drop` of `kchaos sim`; not the packet fault)."""
        return self.default.drop > 0 or any(m.drop > 0 for m in self._links.values())

    @property
    def grudge(self) -> dict[int, tuple[int, ...]]:
        return {n: tuple(sorted(cut)) for n, cut in sorted(self._grudge.items())}

    @property
    def partitioned(self) -> bool:
        return bool(self._grudge)

    def can_hear(self, dst: int, src: int) -> bool:
        cut = self._grudge.get(dst)
        if cut is not None and src in cut:
            return False
        if self._layers:
            for layer in self._layers.values():
                cut = layer.get(dst)
                if cut is not None and src in cut:
                    return False
        return True

    # --- traffic ---
    def transit(self, src: int, dst: int) -> int | None:
        """Delay in ms for a message `src` -> `dst` sent now, or None when it is lost."""
        self.sent += 1
        model = self.link(src, dst)
        # Draw the same random numbers whatever the outcome, so a partition does not shift the
        # random stream of every later decision (smaller diffs between related seeds' traces).
        lost = self._rng.random() < model.drop
        delay = model.sample_delay(self._rng)
        degraded = self.packet_fault
        if degraded is not None and degraded.affects(src, dst):
            # Drawn only on affected links, whatever the outcome (as above).
            fault = degraded.fault
            self.fault_affected += 1
            fault_lost = self._rng.random() < fault.loss
            jitter = round(fault.jitter_ms)
            delay += round(fault.delay_ms) + (self._rng.randint(-jitter, jitter) if jitter else 0)
            if fault_lost and not lost:
                self.fault_dropped += 1
                lost = True
        if lost or not self.can_hear(dst, src):
            self.dropped += 1
            return None
        return delay

    def copies(self, src: int, dst: int, delay: int) -> tuple[int, ...]:
        """Delays in ms (from now) of the extra copies of a message `src` -> `dst` sent now that
        `transit` let through with `delay`: none unless the redeliver fault affects the link."""
        redelivery = self.redelivery
        if redelivery is None or not redelivery.affects(src, dst):
            return ()
        fault = redelivery.fault
        assert isinstance(fault, RedeliverFault)
        # Both numbers drawn whatever the outcome (as in `transit`).
        hit = self._rng.random() < fault.probability
        if fault.mode == "duplicate":
            at = delay + self._rng.randint(0, fault.lag_ms)
        else:
            at = max(delay, round(fault.lag_ms * self._rng.uniform(0.75, 1.25)))
        if not hit:
            return ()
        self.redelivered += 1
        return (at,)
