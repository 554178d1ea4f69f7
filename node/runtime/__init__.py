"""The real runtime: one OS process per node, driving the sans-IO core with asyncio, TCP and fsync.

- `server`: `NodeServer`, the event loop around `RaftNode` (also the in-process embedding API);
- `peers`: one outbound connection per peer, with backoff and request timeouts;
- `frame_writer`: the frames of one loop turn to one connection leave in one send (also the client's);
- `appends`: coalescing the appends of one loop turn into one `Append`;
- `file_storage`: segment files, quorum-state and meta.properties with real fsync;
- `properties` / `server_config`: `server.properties` with Kafka's key names;
- `metrics`, `http_endpoint`, `admin_http`: Prometheus metrics, status and the test-only append;
- `cli` / `quorum_cli`: `kchaos node start` and `kchaos quorum describe`;
- `local_cluster`: configs and processes for a loopback cluster (tests, benchmarks).
"""
