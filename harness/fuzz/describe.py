"""Inputs and node states for a human: what `kchaos fuzz --replay` prints about a finding."""

from __future__ import annotations

from harness.fuzz.inprocess import NodeUnderTest
from node.protocol.codec import BinaryCodec, FrameError


def describe_frame(frame: bytes, codec: BinaryCodec) -> list[str]:
    """A frame for a human: its size, what it decodes to (or why it does not), its bytes in hex."""
    try:
        decoded = codec.decode(frame)
        reads = f"decodes as {decoded.message!r}"
    except FrameError as exc:
        reads = f"refused by the codec: {exc}"
    shown = frame[:256].hex(" ", -4)
    more = f" ... ({len(frame) - 256} more)" if len(frame) > 256 else ""
    return [f"{len(frame)} bytes, {clip(reads)}", f"hex: {shown}{more}"]


def clip(text: str, limit: int = 600) -> str:
    return text if len(text) <= limit else f"{text[:limit]} ... ({len(text) - limit} more characters)"


def describe_node(node: NodeUnderTest) -> str:
    raft = node.raft
    return (
        f"node {node.config.raft.node_id}: {raft.role.name.lower()} at epoch {raft.epoch} (leader {raft.leader_id}), "
        f"log {raft.log_start_offset}..{raft.log_end_offset} (last epoch {raft.last_epoch}), "
        f"high watermark {raft.high_watermark}, virtual time {node.now} ms"
    )
