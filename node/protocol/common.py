"""Sentinels shared by the admin and inter-node messages, with Kafka's values."""

from __future__ import annotations

import uuid

ZERO_UUID = uuid.UUID(int=0)  # Kafka's Uuid.ZERO_UUID: "no topic id" / "unknown incarnation"
NO_BROKER = -1  # an unknown leader, controller or broker id
UNKNOWN_OFFSET = -1  # a metadata offset nobody has seen yet
UNKNOWN_EPOCH = -1

__all__ = ["NO_BROKER", "UNKNOWN_EPOCH", "UNKNOWN_OFFSET", "ZERO_UUID"]
