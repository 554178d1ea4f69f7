"""The metadata layer: what the quorum's log means (KIP-631, KIP-630), below controller and broker.

The raft core (`node.raft`) replicates opaque record bytes; this package gives them meaning. Like the
raft core it is sans-IO: no files, sockets or clock (a test enforces it), so both runtimes and the
simulator share it.

- `records`: KIP-631's metadata records as dataclasses (Kafka's names and record type numbers) and
  their compact, canonical binary encoding. One admin request = one list of records = one atomic
  raft batch (`encode_records`).
- `image`: `MetadataImage`, the state built by replaying committed records in offset order, and
  `MetadataDelta`, changes over an image that the controller uses to validate a batch before it
  appends it, and that `apply_batch` uses to apply a batch atomically. The image applies records and
  checks invariants; it decides nothing (the controller writes the partition changes that take a
  fenced broker out of the ISRs).
- `snapshot`: the image at (end offset, epoch) as bytes, Kafka's file naming, and chunked
  FetchSnapshot-style transfer; the runtime writes the files.
- `dump`: the committed-log dump (one line per record, for the log-agreement checker) and the image
  dump (canonical JSON and its SHA-256).
"""
