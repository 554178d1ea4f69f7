"""The config workloads through confluent-kafka (workloads/kafka_client.py): librdkafka's errors as
Jepsen's definite (`fail`) and indefinite (`info`) outcomes, librdkafka's results as our answers, and
the `client` option. The mapping is checked on confluent-kafka's own error objects and, for the
"never sent" case, on a real librdkafka client that cannot reach anyone."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import confluent_kafka.admin as ck
import pytest
from confluent_kafka import KafkaError, KafkaException

from node.protocol.admin import ConfigOperation, ConfigSource
from workloads.calls import Answer, failed
from workloads.config_append import append_answer
from workloads.config_register import write_answer
from workloads.config_requests import alter_request, describe_request, described_values
from workloads.kafka_client import (
    FAIL_CODES,
    FAIL_LOCAL,
    alter_response,
    client_choice,
    describe_response,
    from_librdkafka,
    incremental_resources,
    is_definite,
)

REPO = Path(__file__).resolve().parents[2]
AFTER_SEND = "Failed while waiting for response from broker: Local: Timed out"


def raised(code: int, message: str = "") -> KafkaException:
    return KafkaException(KafkaError(code, message))


@pytest.mark.parametrize("name", sorted(FAIL_CODES) + sorted(FAIL_LOCAL))
def test_errors_raised_before_applying_are_definite(name):
    code = getattr(KafkaError, name)
    error = from_librdkafka(raised(code, "refused"))
    assert error.definite and error.librdkafka_name == name
    assert failed(error, "b1").type == "fail"


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("_TIMED_OUT", AFTER_SEND),
        ("_TIMED_OUT_QUEUE", "Failed while waiting for response from broker: Local: Timed out in queue"),
        ("_TRANSPORT", "Broker transport failure"),
        ("_ALL_BROKERS_DOWN", "all brokers down"),
        ("_DESTROY", "Handle is terminating"),
        ("REQUEST_TIMED_OUT", "Broker: Request timed out"),
        ("NOT_CONTROLLER", "Broker: Not controller"),
        ("NETWORK_EXCEPTION", "Broker: network exception"),
        ("UNKNOWN", "Broker: Unknown broker error"),
        ("LEADER_NOT_AVAILABLE", "Broker: leader not available"),
    ],
)
def test_errors_after_a_possible_send_are_indefinite(name, message):
    error = from_librdkafka(raised(getattr(KafkaError, name), message))
    assert not error.definite
    assert failed(error, "b1").type == "info"


def test_a_timeout_before_the_send_is_definite_and_one_after_it_is_not():
    assert is_definite("_TIMED_OUT", "Failed while waiting for controller: Local: Timed out")
    assert is_definite("_TIMED_OUT", "Timed out waiting for broker")
    assert not is_definite("_TIMED_OUT", AFTER_SEND)
    assert not is_definite("_TIMED_OUT", "")


def test_the_loop_giving_up_and_unexpected_exceptions_are_indefinite():
    assert not from_librdkafka(TimeoutError()).definite
    assert not from_librdkafka(AttributeError("a bug of ours")).definite


def _alter(changes):
    request = alter_request(changes)
    return request, incremental_resources(request)


def test_an_alter_answer_maps_per_resource_codes_and_a_transport_error_fails_the_whole_op():
    _, resources = _alter(
        [
            ("a/retention.ms", ConfigOperation.SET, "7"),
            ("b/leader.replication.throttled.replicas", ConfigOperation.APPEND, "1:0"),
        ]
    )
    assert [(r.name, r.restype_int) for r in resources] == [("a", 2), ("b", 2)]
    assert [e.incremental_operation for r in resources for e in r.incremental_configs] == [
        ck.AlterConfigOpType.SET,
        ck.AlterConfigOpType.APPEND,
    ]
    # applied + refused by validation: a partial answer, as from our own client
    response = alter_response(
        [(resources[0], None, None), (resources[1], None, raised(KafkaError.INVALID_CONFIG, "bad"))]
    )
    mops = [["append", "a/retention.ms", "1:0"], ["append", "b/leader.replication.throttled.replicas", "2:0"]]
    partial = append_answer(mops, Answer(response, None, "b1"))
    assert partial.type == "ok" and partial.value == mops[:1] and "INVALID_CONFIG" in partial.error
    # one resource timed out after the send: nothing is known of the request
    with pytest.raises(Exception) as caught:
        alter_response([(resources[0], None, None), (resources[1], None, raised(KafkaError._TIMED_OUT, AFTER_SEND))])
    assert write_answer(Answer(None, caught.value, "b1")).type == "info"
    refused = alter_response([(resources[0], None, raised(KafkaError.UNKNOWN_TOPIC_OR_PART, "no such topic"))])
    assert write_answer(Answer(refused, None, "b1")).type == "fail"


def test_a_describe_answer_gives_dynamic_values_and_none_for_defaults():
    keys = ["a/retention.ms", "a/segment.ms"]
    [resource] = [ck.ConfigResource(ck.ResourceType.TOPIC, "a")]
    entries = {
        "retention.ms": ck.ConfigEntry("retention.ms", "7", source=ck.ConfigSource.DYNAMIC_TOPIC_CONFIG),
        "segment.ms": ck.ConfigEntry("segment.ms", "604800000", source=ck.ConfigSource.DEFAULT_CONFIG),
    }
    response = describe_response([(resource, entries, None)])
    assert described_values(response, keys) == {"a/retention.ms": "7", "a/segment.ms": None}
    assert response.results[0].configs[1].config_source == ConfigSource.DEFAULT_CONFIG
    assert len(describe_request(keys).resources) == 1


def test_a_librdkafka_client_that_reaches_no_one_fails_definitely():
    """A real AdminClient bootstrapped on a port nobody listens on never finds a controller: its write
    was never sent, so the op is `fail`, not `info`."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again before the client connects
    admin = ck.AdminClient({"bootstrap.servers": f"127.0.0.1:{port}", "log_level": 0})
    _, [resource] = _alter([("t/retention.ms", ConfigOperation.SET, "5")])
    future = admin.incremental_alter_configs([resource], request_timeout=1)[resource]
    with pytest.raises(KafkaException) as caught:
        future.result(10)
    error = from_librdkafka(caught.value)
    assert error.librdkafka_name == "_TIMED_OUT" and error.definite, error


def test_the_client_option_is_checked():
    def env(client, sim=None):
        return SimpleNamespace(option=lambda name, default: client or default, db=SimpleNamespace(sim=sim))

    assert client_choice(env(None)) == "kraft-chaos"
    assert client_choice(env("confluent-kafka")) == "confluent-kafka"
    with pytest.raises(ValueError, match="expected one of kraft-chaos, confluent-kafka"):
        client_choice(env("kafka-python"))
    with pytest.raises(ValueError, match="needs a real backend"):
        client_choice(env("confluent-kafka", sim=object()))


@pytest.mark.parametrize(
    ("workload", "message"),
    [
        ("config-register", "client=confluent-kafka needs a real backend"),
        ("registrations", "registrations: workload option client=confluent-kafka needs a real backend"),
        ("isr-changes", "isr-changes: workload option client=confluent-kafka needs a real backend"),
    ],
)
def test_the_cli_flag_reaches_the_workload(workload, message):
    """`--client confluent-kafka` where it cannot run: one line naming the option, exit 254."""
    argv = ["run", "--backend", "sim", "--workload", workload, "--client", "confluent-kafka", "--time-limit", "1s"]
    done = subprocess.run(
        [sys.executable, "-m", "harness", *argv], capture_output=True, text=True, cwd=REPO, timeout=120
    )
    assert done.returncode == 254, done.stdout + done.stderr
    assert message in done.stderr
    assert "Traceback" not in done.stderr
