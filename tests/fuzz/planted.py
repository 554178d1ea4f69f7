"""A crash planted in the node for a test: a fuzzer (or a night) that cannot fail proves nothing."""

from __future__ import annotations


def plant_a_crash(monkeypatch) -> None:
    """Make `NodeProcess` raise RuntimeError('planted') on every DescribeQuorum request."""
    from node.process.process import NodeProcess

    real = NodeProcess._route

    def broken(self, ctx, reply_to, correlation_id, message):
        if type(message).__name__ == "DescribeQuorumRequest":
            raise RuntimeError("planted")
        return real(self, ctx, reply_to, correlation_id, message)

    monkeypatch.setattr(NodeProcess, "_route", broken)
