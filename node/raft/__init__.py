"""KIP-595's Raft dialect as a sans-IO state machine.

Nothing in this package reads a clock, opens a socket or touches a file (a test enforces it). A runtime
feeds `RaftNode.handle(now_ms, event)` and carries out the actions it returns, in order:

- `records`: record batches, control records and their byte format (with CRC32C);
- `log`: the in-memory view of the replicated log and its epoch -> start-offset cache;
- `quorum_state`: the persisted election state (`QuorumStateMessage`), one class per role (each owning
  what only that role waits on) and the legal transitions between them;
- `waiting`: the records the node keeps while it waits (parked Fetches, barriers, appends, snapshots);
- `events` / `actions`: what goes into and comes out of the state machine;
- `storage`: the abstract persistent storage both runtimes implement;
- `config`: the `quorum.*` settings;
- `node`: `RaftNode`, the entry point, put together from one module per KIP section: `election`,
  `pre_vote` (KIP-996), `timers`, `fetch`, `high_watermark`, `append`, `begin_quorum_epoch`, `end_quorum_epoch`,
  `describe_quorum`, `read_barrier`, `snapshots` (and `base`, the state that outlives a role; it
  imports none of them).
"""
