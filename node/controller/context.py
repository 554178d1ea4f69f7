"""What a request handler may use of the controller: `ControllerContext`.

The handlers (acls, configs, partitions, registration, topics) take the controller as this protocol
rather than importing `QuorumController`, which imports them to dispatch: the dependency points one
way, from the controller down to its handlers and from both down to this module.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from node.controller.config import ControllerConfig
from node.controller.sessions import Sessions
from node.metadata.image import MetadataImage
from node.metadata.records import MetadataRecord
from node.process.ports import AppendOutcome, RequestContext

# How a handler answers its request (called once, with the response).
Reply = Callable[[object], None]


class ControllerContext(Protocol):
    """The active controller as its request handlers see it (`QuorumController` implements it)."""

    config: ControllerConfig
    sessions: Sessions

    @property
    def working(self) -> MetadataImage:
        """The committed image plus this controller's in-flight records."""
        ...

    def allowed(self, ctx: RequestContext, operation: int, resource_type: int, resource_name: str) -> bool:
        """Whether the request's principal may do `operation` on the resource."""
        ...

    def next_offset(self) -> int:
        """The offset the next record written will get."""
        ...

    def new_uuid(self, *parts: object) -> str:
        """A fresh id derived from the log position."""
        ...

    def write(
        self,
        request: object,
        records: Sequence[MetadataRecord],
        reply: Reply | None,
        on_success: Callable[[AppendOutcome], object],
    ) -> bool:
        """Append `records` as one batch and answer `reply` once it is decided; False if refused."""
        ...

    def answer_when_settled(self, request: object, reply: Reply, answer: object) -> None:
        """Answer once every append the working state holds now has committed."""
        ...

    def arm_session_timer(self, deadline_ms: int) -> None:
        """Make sure the controller ticks by `deadline_ms`."""
        ...
