"""Faults and schedules (BRIEF §2): the catalogue of fault kinds, target choice, partitions as
grudges, and the nemesis that carries faults out through a `Backend` and a `DB` adapter.

Modules: `catalogue` (every kind, its modes and parameters; what `kchaos nemeses` prints),
`options` (a run's per-kind weights, modes, targets and parameters), `targets`, `partitions`,
`nemesis` (the `Handler` of the nemesis process), `cli` (`kchaos nemeses`). The schedule that emits
`start-<kind>`/`stop-<kind>` ops is a generator: `vocab.generators.schedule`.

Nothing is imported here, so reading the catalogue (every CLI start does) stays cheap.
"""
