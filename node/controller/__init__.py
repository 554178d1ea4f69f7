"""The quorum controller (KIP-631): a sans-IO state machine driven through a `ProcessPort`."""

from node.controller.config import ControllerConfig, make_authorizer
from node.controller.controller import QuorumController

__all__ = ["ControllerConfig", "QuorumController", "make_authorizer"]
