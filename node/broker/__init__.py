"""The broker: a sans-IO state machine a node process drives through `node.process.ports.ProcessPort`.

`Broker` (broker.py) glues `Lifecycle` (registration, heartbeats, KIP-500 states), `ForwardingManager`
(KIP-590 Envelopes to the active controller), `IsrManager` (KIP-497 ISR tracking with replica
heartbeats) and `ReadHandler` (reads from the metadata image). `BrokerConfig` holds its settings.
"""

from node.broker.broker import Broker
from node.broker.config import BrokerConfig
from node.broker.lifecycle import BrokerState

__all__ = ["Broker", "BrokerConfig", "BrokerState"]
