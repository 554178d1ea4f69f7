"""The shared vocabulary: the bottom layer, which imports nothing else of ours.

Exit codes and `UserError` (`errors`), the fault kinds and their catalogue (`faults`), the backend and
system-under-test protocols (`backend`, `db`), ops and the generator algebra (`generators`), client
invocations (`invocation`), the run's scheduler (`schedulers`) and the workload plug-in protocol
(`workload`). Everything above it (node, checkers, nemesis, workloads, harness) speaks these words;
see docs/design.md, "Layers".
"""
