"""Registration, heartbeats and the KIP-500 states of the broker."""

from __future__ import annotations

import pytest

from node.broker import BrokerConfig, BrokerState
from node.protocol.broker_api import (
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
)
from node.protocol.errors import ErrorCode
from node.raft.config import ConfigError
from tests.broker.fakes import CLUSTER, INCARNATION, LISTENERS, FakePort, bring_online, make_broker

OK_UNFENCED = BrokerHeartbeatResponse(ErrorCode.NONE, True, False, False)
OK_FENCED = BrokerHeartbeatResponse(ErrorCode.NONE, False, True, False)


def test_registers_with_the_active_controller_once_one_is_known_then_is_unfenced_by_a_heartbeat():
    broker, port = make_broker(node_id=1, heartbeat_interval_ms=2000, rack="r1")
    broker.start(0)
    assert broker.state is BrokerState.OFFLINE and broker.broker_epoch == -1
    assert port.sent == []  # no controller known yet

    port.leader_id = 101
    broker.on_leader_change(10)
    reg = port.last(BrokerRegistrationRequest)
    assert reg.destination == 101
    assert reg.message == BrokerRegistrationRequest(
        1, CLUSTER, INCARNATION, LISTENERS, BrokerConfig(node_id=1).features, "r1"
    )

    reg.reply(BrokerRegistrationResponse(ErrorCode.NONE, 42))
    assert broker.state is BrokerState.FENCED and broker.broker_epoch == 42
    hb = port.last(BrokerHeartbeatRequest)
    assert hb.destination == 101
    assert hb.message == BrokerHeartbeatRequest(1, 42, port.image.last_offset, False, False)

    hb.reply(OK_FENCED)
    assert broker.state is BrokerState.FENCED
    broker.on_tick(2010)
    hb2 = port.last(BrokerHeartbeatRequest)
    assert hb2 is not hb
    hb2.reply(OK_UNFENCED)
    assert broker.state is BrokerState.ONLINE


def test_cluster_id_comes_from_the_image_when_not_configured():
    broker, port = make_broker(cluster_id=None, leader_id=100)
    port.image.cluster_id = None
    broker.start(0)
    assert port.sent == []  # the image has no cluster id yet
    port.image.set_cluster_id("from-the-log")
    broker.on_committed(5)
    assert port.last(BrokerRegistrationRequest).message.cluster_id == "from-the-log"


def test_heartbeats_every_interval_with_the_applied_metadata_offset():
    broker, port = make_broker(leader_id=100, heartbeat_interval_ms=500)
    bring_online(broker, port, now_ms=0)
    assert len(port.sent_of(BrokerHeartbeatRequest)) == 1
    broker.on_tick(499)
    assert len(port.sent_of(BrokerHeartbeatRequest)) == 1
    assert 500 in port.wakes
    port.image.set_position(77, 3)
    broker.on_tick(500)
    hbs = port.sent_of(BrokerHeartbeatRequest)
    assert len(hbs) == 2 and hbs[-1].message.current_metadata_offset == 77
    # One in flight at a time; unanswered for a whole interval, it is superseded and its late answer ignored.
    broker.on_tick(999)
    assert len(port.sent_of(BrokerHeartbeatRequest)) == 2
    broker.on_tick(1000)
    hbs = port.sent_of(BrokerHeartbeatRequest)
    assert len(hbs) == 3
    hbs[1].reply(OK_FENCED)  # late: would fence the broker if it were believed
    assert broker.state is BrokerState.ONLINE
    assert broker.metrics()["broker.heartbeat_failures_total"] == 1


def test_duplicate_registration_is_retried_until_the_old_session_lapses():
    """As Kafka's BrokerLifecycleManager: a live session holds the id (often this broker's own
    previous incarnation), so the refusal is temporary: back off and register again."""
    broker, port = make_broker(leader_id=100, retry_backoff_ms=100)
    broker.start(0)
    port.last(BrokerRegistrationRequest).reply(BrokerRegistrationResponse(ErrorCode.DUPLICATE_BROKER_REGISTRATION))
    assert port.shutdowns == [] and broker.shut_down_reason is None
    assert broker.state is BrokerState.OFFLINE and broker.broker_epoch == -1
    broker.on_tick(50)
    assert len(port.sent_of(BrokerRegistrationRequest)) == 1  # not before the backoff
    broker.on_tick(100)
    again = port.sent_of(BrokerRegistrationRequest)
    assert len(again) == 2 and again[-1].message.incarnation_id == INCARNATION  # the same incarnation
    again[-1].reply(BrokerRegistrationResponse(ErrorCode.NONE, 9))
    assert broker.broker_epoch == 9 and broker.state is BrokerState.FENCED


def test_not_controller_or_no_answer_on_registration_is_retried_after_backoff_or_on_a_new_controller():
    broker, port = make_broker(leader_id=100, retry_backoff_ms=100)
    broker.start(0)
    port.last(BrokerRegistrationRequest).reply(BrokerRegistrationResponse(ErrorCode.NOT_CONTROLLER))
    broker.on_tick(50)
    assert len(port.sent_of(BrokerRegistrationRequest)) == 1
    broker.on_tick(100)
    assert len(port.sent_of(BrokerRegistrationRequest)) == 2
    port.last(BrokerRegistrationRequest).reply(None)  # no answer
    broker.on_tick(105)  # backing off
    assert len(port.sent_of(BrokerRegistrationRequest)) == 2
    port.leader_id = 102
    broker.on_leader_change(110)  # a new controller: at once, no backoff
    last = port.last(BrokerRegistrationRequest)
    assert len(port.sent_of(BrokerRegistrationRequest)) == 3 and last.destination == 102
    assert port.shutdowns == []


@pytest.mark.parametrize("error", [ErrorCode.STALE_BROKER_EPOCH, ErrorCode.BROKER_ID_NOT_REGISTERED])
def test_lost_registration_registers_again_with_the_same_incarnation(error):
    broker, port = make_broker(leader_id=100)
    bring_online(broker, port, epoch=5)
    broker.on_tick(5000)
    port.last(BrokerHeartbeatRequest).reply(BrokerHeartbeatResponse(error))
    assert broker.state is BrokerState.FENCED and broker.broker_epoch == -1
    regs = port.sent_of(BrokerRegistrationRequest)
    assert len(regs) == 2 and regs[-1].message.incarnation_id == INCARNATION
    regs[-1].reply(BrokerRegistrationResponse(ErrorCode.NONE, 90))
    assert broker.broker_epoch == 90
    assert port.last(BrokerHeartbeatRequest).message.broker_epoch == 90


def test_controller_fencing_an_online_broker_takes_it_offline_for_clients():
    broker, port = make_broker(leader_id=100)
    bring_online(broker, port)
    broker.on_tick(5000)
    port.last(BrokerHeartbeatRequest).reply(OK_FENCED)
    assert broker.state is BrokerState.FENCED


def test_controlled_shutdown_asks_through_heartbeats_and_stops_when_told():
    broker, port = make_broker(leader_id=100, heartbeat_interval_ms=1000)
    bring_online(broker, port, now_ms=0)
    broker.begin_shutdown(100)
    assert broker.state is BrokerState.STOPPING
    hb = port.last(BrokerHeartbeatRequest)
    assert hb.message.want_shut_down is True  # sent at once, not at the next interval
    hb.reply(BrokerHeartbeatResponse(ErrorCode.NONE, True, False, False))  # leaderships not moved yet
    assert broker.state is BrokerState.STOPPING and port.shutdowns == []
    broker.on_tick(1100)
    hb = port.last(BrokerHeartbeatRequest)
    assert hb.message.want_shut_down is True
    hb.reply(BrokerHeartbeatResponse(ErrorCode.NONE, True, True, True))
    assert port.shutdowns == ["controlled shutdown complete"]


def test_shutdown_before_registering_needs_no_controller():
    broker, port = make_broker()
    broker.start(0)
    broker.begin_shutdown(1)
    assert len(port.shutdowns) == 1 and port.sent == []


def test_config_rejects_bad_values_naming_the_property():
    with pytest.raises(ConfigError, match=r"broker\.heartbeat\.interval\.ms"):
        BrokerConfig(node_id=1, heartbeat_interval_ms=0)
    with pytest.raises(ConfigError, match=r"replica\.lag\.time\.max\.ms"):
        BrokerConfig(node_id=1, replica_lag_time_max_ms=100, replica_heartbeat_interval_ms=100)
    cfg = BrokerConfig.from_properties(3, {"broker.heartbeat.interval.ms": "250", "broker.rack": "east", "x": "1"})
    assert cfg.heartbeat_interval_ms == 250 and cfg.rack == "east" and cfg.node_id == 3
    with pytest.raises(ConfigError, match=r"server\.properties: request\.timeout\.ms='soon'"):
        BrokerConfig.from_properties(3, {"request.timeout.ms": "soon"}, where="server.properties")


def test_a_config_for_another_node_is_refused():
    from node.broker import Broker

    with pytest.raises(ValueError, match="node 2"):
        Broker(FakePort(node_id=1), BrokerConfig(node_id=2), INCARNATION, LISTENERS, CLUSTER)


def test_a_failed_heartbeat_is_retried_after_backoff_or_at_once_to_a_new_controller():
    broker, port = make_broker(leader_id=100, heartbeat_interval_ms=2000, retry_backoff_ms=100)
    bring_online(broker, port, now_ms=0)
    broker.on_tick(2000)
    port.last(BrokerHeartbeatRequest).reply(BrokerHeartbeatResponse(ErrorCode.NOT_CONTROLLER))
    broker.on_tick(2099)
    assert len(port.sent_of(BrokerHeartbeatRequest)) == 2
    broker.on_tick(2100)  # not a whole interval later
    assert len(port.sent_of(BrokerHeartbeatRequest)) == 3
    port.last(BrokerHeartbeatRequest).reply(None)
    port.leader_id = 102
    broker.on_leader_change(2101)
    assert len(port.sent_of(BrokerHeartbeatRequest)) == 4 and port.last(BrokerHeartbeatRequest).destination == 102
    assert broker.state is BrokerState.ONLINE  # a failed heartbeat alone does not fence the broker


def test_a_registration_lost_without_a_notice_asks_for_the_wake_up_that_sends_it_again():
    # On an idle cluster nothing else calls poll (no commit, no new controller): the wake-up armed when
    # the request went out is what gives it up and sends it again (sim_cluster seed 1000, 2 % drops).
    broker, port = make_broker(leader_id=100, heartbeat_interval_ms=500)
    broker.start(0)
    assert len(port.sent_of(BrokerRegistrationRequest)) == 1 and 500 in port.wakes
    broker.on_tick(500)  # never answered
    assert len(port.sent_of(BrokerRegistrationRequest)) == 2 and broker.state is BrokerState.OFFLINE


def test_a_heartbeat_lost_without_a_notice_asks_for_the_wake_up_that_sends_the_next():
    broker, port = make_broker(leader_id=100, heartbeat_interval_ms=500)
    broker.start(0)
    port.wakes.clear()
    port.last(BrokerRegistrationRequest).reply(BrokerRegistrationResponse(ErrorCode.NONE, 42))
    assert len(port.sent_of(BrokerHeartbeatRequest)) == 1  # the first heartbeat goes out at once ...
    assert 500 in port.wakes  # ... and never answered, it is given up (and the next sent) at 500 ms
    broker.on_tick(500)
    assert len(port.sent_of(BrokerHeartbeatRequest)) == 2
