"""The deterministic simulator: RaftNode cores in virtual time, with one seeded RNG.

- `scheduler`: the event queue (time, insertion order);
- `clock`, `network`, `disk`: per-node clocks, the simulated network, simulated disks (`RaftStorage`);
- `world`: `Simulation`, the runtime that carries out the cores' actions, and the fault methods;
- `invariants`: the safety checks run after every event; `trace`: the trace and its digest;
- `workload`, `faults`: the built-in append client and the random fault schedule;
- `runner`: one scripted run with final checks and summary; `cli`: `kchaos sim`.
"""
