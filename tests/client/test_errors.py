"""The admin client's error table: which failures are definite (`fail`) and which may have happened (`info`)."""

from __future__ import annotations

import pickle

import pytest

from node.client import errors as E
from node.client.results import ConfigAlteration, ConfigResource, raise_first
from node.protocol.errors import ErrorCode


@pytest.mark.parametrize(
    ("code", "cls"),
    [
        (ErrorCode.NOT_CONTROLLER, E.NotControllerError),
        (ErrorCode.TOPIC_ALREADY_EXISTS, E.TopicAlreadyExistsError),
        (ErrorCode.SASL_AUTHENTICATION_FAILED, E.AuthenticationError),
        (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, E.AuthorizationError),
        (ErrorCode.STALE_BROKER_EPOCH, E.StaleBrokerEpochError),
        (ErrorCode.DUPLICATE_BROKER_REGISTRATION, E.DuplicateBrokerRegistrationError),
        (ErrorCode.INVALID_UPDATE_VERSION, E.ServerError),
    ],
)
def test_an_answered_error_code_is_definite(code, cls):
    err = E.server_error(code, "no", server="h:1", resource="topic:t")
    assert type(err) is cls and isinstance(err, E.KafkaError)
    assert err.definite and err.code == code
    assert str(err) == f"{code.name} [topic:t]: no (from h:1)"


@pytest.mark.parametrize(
    ("code", "cls"),
    [
        (ErrorCode.REQUEST_TIMED_OUT, E.RequestTimedOutError),  # a forwarding broker lost the outcome
        (ErrorCode.UNKNOWN_SERVER_ERROR, E.UnknownServerError),
        (ErrorCode.NETWORK_EXCEPTION, E.ServerNetworkError),
    ],
)
def test_ambiguous_answered_codes_are_not_definite(code, cls):
    err = E.server_error(code)
    assert type(err) is cls and not err.definite


def test_client_side_failures_say_whether_the_request_was_written():
    assert E.ConnectError("refused").definite
    assert not E.ConnectionLostError("reset").definite
    assert not E.ProtocolError("garbage").definite
    assert E.UnsupportedApiError("no").definite
    assert E.unencodable("too big").definite
    assert E.ClientTimeoutError("late", sent=False).definite
    assert not E.ClientTimeoutError("late", sent=True).definite


def test_retriable_follows_kafka():
    assert E.server_error(ErrorCode.NOT_CONTROLLER).retriable
    assert not E.server_error(ErrorCode.TOPIC_ALREADY_EXISTS).retriable


def test_errors_survive_pickling_with_their_fate():
    for err in (E.server_error(ErrorCode.REQUEST_TIMED_OUT, "x", server="h:1"), E.ConnectError("refused")):
        back = pickle.loads(pickle.dumps(err))
        assert (type(back), back.code, back.definite, back.server, str(back)) == (
            type(err),
            err.code,
            err.definite,
            err.server,
            str(err),
        )


def test_raise_first_prefers_an_indefinite_error():
    definite = E.server_error(ErrorCode.INVALID_CONFIG)
    unknown = E.server_error(ErrorCode.REQUEST_TIMED_OUT)
    outcomes = [
        ConfigAlteration(resource=ConfigResource.topic("a")),
        ConfigAlteration(resource=ConfigResource.topic("b"), error=definite),
        ConfigAlteration(resource=ConfigResource.topic("c"), error=unknown),
    ]
    with pytest.raises(E.RequestTimedOutError):
        raise_first(outcomes)
    with pytest.raises(E.InvalidConfigError):
        raise_first(outcomes[:2])
    raise_first(outcomes[:1])
