"""Write coalescing for one connection: the frames written during one event-loop turn leave in one send.

Under load a node answers many requests in one step (a commit that completes 60 forwarded writes, a
burst of client requests forwarded to the controller). Written one by one, each frame costs a
`send` system call and a wake-up of the peer; gathered, they cost one. The frames keep their order,
nothing waits longer than the current loop turn (no Nagle-style delay), and asyncio's transports
already set TCP_NODELAY.
"""

from __future__ import annotations

import asyncio

# A burst is cut into sends of about this many bytes (the size a peer reads at once), so a peer can start
# on a large burst while the rest is produced. Bursts of small frames are not cut: on this benchmark's
# 2 cores, cutting 64 forwarded writes into sends of 16 frames cost more than it overlapped (each cut
# splits the batches downstream too: the controller's Raft batches, the followers' fetches and fsyncs);
# one send per loop turn took the servers' CPU per write from ~330 to ~200 ms per 1,000 writes
# (docs/internals/controller.md, "Where the write path's CPU goes").
CHUNK_BYTES = 1 << 16


class FrameWriter:
    """Buffers `write`s and hands them to the transport together at the end of the loop turn."""

    __slots__ = ("_loop", "_parts", "_pending_bytes", "_scheduled", "writer")

    def __init__(self, writer: asyncio.StreamWriter, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self.writer = writer
        self._loop = loop or asyncio.get_running_loop()
        self._parts: list[bytes] = []
        self._pending_bytes = 0
        self._scheduled = False

    def write(self, frame: bytes) -> None:
        self._parts.append(frame)
        self._pending_bytes += len(frame)
        if self._pending_bytes >= CHUNK_BYTES:
            self.flush()
        elif not self._scheduled:
            self._scheduled = True
            self._loop.call_soon(self.flush)

    def flush(self) -> None:
        """Send what is buffered now (also called at the end of the loop turn)."""
        self._scheduled = False
        parts = self._parts
        if not parts:
            return
        data = parts[0] if len(parts) == 1 else b"".join(parts)
        parts.clear()
        self._pending_bytes = 0
        if not self.writer.transport.is_closing():
            self.writer.write(data)

    @property
    def buffered_bytes(self) -> int:
        """Bytes written but not yet taken by the peer: ours plus the transport's own buffer."""
        return self._pending_bytes + self.writer.transport.get_write_buffer_size()

    def close(self) -> None:
        """Send what is buffered, then close (the transport sends its buffer before closing)."""
        self.flush()
        self.writer.close()


__all__ = ["FrameWriter"]
