"""The fuzzer: structure-aware mutation of every frame a node reads and every file it loads.

It drives nodes from outside, as a runtime or a peer would (`targets`: in-process, the codec and
the sans-IO process core fed decoded frames; `real_node`: a node process over loopback sockets),
and checks the contract of docs/trust/fuzzing.md: no crash, no hang, a one-line refusal, the other
peers still served, nothing lost.
"""
