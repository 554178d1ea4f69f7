"""`AppendError`: how the runtime's `append` (the embedded API and the admin endpoint's test append)
says a write did not commit. A module of its own so the admin endpoint need not import the server."""

from __future__ import annotations

from node.protocol.errors import ErrorCode


class AppendError(Exception):
    """An append that did not commit. `definite`: it certainly never will (else its fate is unknown)."""

    def __init__(self, error: int, message: str, *, definite: bool, leader_id: int = -1) -> None:
        name = ErrorCode(error).name if error in ErrorCode._value2member_map_ else str(error)
        super().__init__(f"{name}: {message}" if message else name)
        self.error = error
        self.definite = definite
        self.leader_id = leader_id
