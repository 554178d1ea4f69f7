"""FrameWriter: the frames written in one loop turn leave in one send, in order, however many there are;
only a burst past CHUNK_BYTES is cut (its parts in order too). A recording transport stands in for the
socket: what is tested is which writes reach it, not the network."""

from __future__ import annotations

import asyncio

from node.runtime.frame_writer import CHUNK_BYTES, FrameWriter


class RecordingTransport:
    def __init__(self) -> None:
        self.writes: list[bytes] = []

    def is_closing(self) -> bool:
        return False

    def get_write_buffer_size(self) -> int:
        return 0


class RecordingWriter:
    """The part of asyncio.StreamWriter that FrameWriter uses."""

    def __init__(self) -> None:
        self.transport = RecordingTransport()

    def write(self, data: bytes) -> None:
        self.transport.writes.append(data)


def sends(frames: list[bytes]) -> list[bytes]:
    async def burst() -> list[bytes]:
        writer = RecordingWriter()
        out = FrameWriter(writer)  # type: ignore[arg-type]
        for frame in frames:
            out.write(frame)
        await asyncio.sleep(0)  # the end of this loop turn
        await asyncio.sleep(0)
        return writer.transport.writes

    return asyncio.run(burst())


def test_a_burst_of_small_frames_leaves_in_one_send_in_order():
    frames = [b"frame-%03d" % i for i in range(64)]  # the benchmark's 64 forwarded writes in flight
    assert sends(frames) == [b"".join(frames)]


def test_a_burst_past_chunk_bytes_is_cut_and_keeps_its_order():
    frames = [bytes([i]) * 5000 for i in range(40)]  # 200,000 bytes
    out = sends(frames)
    assert b"".join(out) == b"".join(frames)
    assert CHUNK_BYTES == 65536  # 14 frames of 5,000 bytes reach it: cut there, the rest at the turn's end
    assert [len(part) for part in out] == [70_000, 70_000, 60_000]
